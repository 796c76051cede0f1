"""Structured logs: one JSON object per line, on stderr.

Secrets never reach a log: the formatter masks the values of known secret
fields, and code never logs tokens, passwords or the cluster secret.

A line emitted while a request is served carries its id as ``request_id``
(services/request_ids.py): ``RequestIdFilter`` on the handler copies it onto the
record, so lines of every logger get it, those of the libraries included.
"""

from __future__ import annotations

import json
import logging
import sys
import time

from services.request_ids import REQUEST_ID

_SECRET_KEYS = ("secret", "token", "password", "authorization")


class RequestIdFilter(logging.Filter):
    """Sets ``record.request_id`` to the id of the request being served (None outside
    one). Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        return True


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id is not None:
            out["request_id"] = request_id
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            for key, value in fields.items():
                out[key] = "***" if any(s in key.lower() for s in _SECRET_KEYS) else value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup_logging(service: str, level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("kazoo.client", "httpx", "httpcore", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
