"""Running a service: settings in, uvicorn out, with our logging."""

from __future__ import annotations

import uvicorn
from fastapi import FastAPI

from services.settings import CommonSettings

# Bounds of the HTTP server itself (STYLE.md §5).
HTTP_BACKLOG = 2048
HTTP_KEEPALIVE_S = 30
HTTP_CONCURRENCY_MAX = 4096


def serve(app: FastAPI, settings: CommonSettings) -> None:
    """Serve ``app`` on the settings' host and port until SIGINT/SIGTERM."""
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,
        loop="uvloop",
        http="httptools",
        backlog=HTTP_BACKLOG,
        timeout_keep_alive=HTTP_KEEPALIVE_S,
        limit_concurrency=HTTP_CONCURRENCY_MAX,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    server.run()
    if not server.started:
        # Start-up failed (the lifespan raised): uvicorn has logged why.
        raise SystemExit(3)
