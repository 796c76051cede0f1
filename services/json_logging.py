"""Structured logs: one JSON object per line, on stderr.

Secrets never reach a log: the formatter masks the values of known secret
fields, and the secrets in the dumps a library writes at debug level (the websockets
handshake logs every header as ``< name: value``, and each frame, a stream's auth message
``{"token": ...}`` included; kazoo logs each request it sends, the ``Auth`` of the
ZooKeeper credentials and the digest ACL of each create included), and code never logs
tokens, passwords or the cluster secret.

A line emitted while a request is served carries its id as ``request_id``
(services/request_ids.py): ``RequestIdFilter`` on the handler copies it onto the
record, so lines of every logger get it, those of the libraries included.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time

from services.request_ids import REQUEST_ID

_SECRET_KEYS = ("secret", "token", "password", "authorization")
# A header line of a library's debug dump whose value is a secret: kept up to the colon.
_SECRET_HEADER_LINE = re.compile(
    r"^([<>] (?:proxy-)?authorization|[<>] x-ledger-password|[<>] x-cluster-secret"
    r"|[<>] cookie)(\s*:).*$",
    re.IGNORECASE | re.MULTILINE,
)
# The token or password of a WebSocket auth message in a library's dump of a frame
# (gateway/streams/session.py), maybe cut short: masked up to its closing quote.
_SECRET_JSON_VALUE = re.compile(r"""(["'](?:token|password)["']\s*:\s*["'])[^"']*""")
# kazoo's dump of a request: the credentials of an Auth (a repr'd string, either quote)
# and the password digest in a digest ACL's id (services/zk/auth.py).
_SECRET_KAZOO_AUTH = re.compile(
    r"""(Auth\(auth_type=\d+, scheme='[^']*', auth=)(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
)
_SECRET_KAZOO_DIGEST = re.compile(r"(Id\(scheme='digest', id='[^':]*:)[^']*")


def _masked(message: str) -> str:
    """``message`` with the secrets of library dumps masked (the module docstring)."""
    if ":" not in message:
        return message
    message = _SECRET_JSON_VALUE.sub(r"\1***", _SECRET_HEADER_LINE.sub(r"\1\2 ***", message))
    if "scheme=" in message:
        message = _SECRET_KAZOO_DIGEST.sub(r"\1***", _SECRET_KAZOO_AUTH.sub(r"\1'***'", message))
    return message


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
            "msg": _masked(record.getMessage()),
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
