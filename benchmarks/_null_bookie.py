"""A bookie that stores nothing: the same server stack as the real one (FastAPI,
uvicorn, httptools, uvloop), answering ``POST /v1/entries`` after parsing the
framing. Used to measure the HTTP path and the clients without storage cost.

    python benchmarks/_null_bookie.py --port 3999
"""

from __future__ import annotations

import argparse

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from services.wire import framing

app = FastAPI()


@app.get("/health")
async def health() -> JSONResponse:
    return JSONResponse({"status": "ok"})


@app.get("/v1/info")
async def info() -> JSONResponse:
    return JSONResponse({"bookie_id": "null", "state": "writable", "journal_sync": False})


@app.post("/v1/entries")
async def add(request: Request) -> JSONResponse:
    records = framing.decode(await request.body())
    return JSONResponse({"stored": len(records), "rejected": []})


@app.post("/v1/ledgers/{lid}/fence")
async def fence(lid: int) -> Response:
    return JSONResponse({"ledger_id": lid, "lac": -1, "last_entry_id": -1, "fenced": True})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
