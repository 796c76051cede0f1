"""The FastAPI application as every Quire service builds it."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

# FastAPI's telemetry looks up environment variables on every request (about a tenth of
# the gateway's CPU on single-entry adds, measured with py-spy): our services export
# Prometheus metrics instead.
TELEMETRY_OFF = {"tracing": False, "metrics": False, "logs": False}


def new_app(**kwargs: Any) -> FastAPI:
    """A FastAPI application as every Quire service builds it."""
    return FastAPI(telemetry=TELEMETRY_OFF, **kwargs)
