"""Request ids: one id per HTTP request, followed from the gateway to the bookies.

A request's id is its ``X-Request-Id`` header when that is sane (1-128 characters of
``A-Za-z0-9._:-``), else a new one (32 random hex digits): an id goes into answer
headers and log lines, so arbitrary client bytes are never reflected.

``REQUEST_ID`` holds the id of the request being served. The HTTP middleware
(services/web/access.py) sets it; every log line emitted meanwhile carries it
(services/json_logging.py), and the bookie client sends it on its calls. asyncio copies the
context into the tasks a request starts, so their work (an ensemble change, a
recovery) carries the id of the request that set it off; work started outside any
request carries none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextvars import ContextVar
from random import getrandbits as _random_bits
from typing import Any

REQUEST_ID_HEADER = "X-Request-Id"
REQUEST_ID_HEADER_RAW = REQUEST_ID_HEADER.lower().encode()
REQUEST_ID_MAX_CHARS = 128
# Where the access middleware leaves a request's id in its ASGI scope.
REQUEST_ID_SCOPE_KEY = "quire.request_id"

_SANE = re.compile(rb"[A-Za-z0-9._:\-]{1,%d}" % REQUEST_ID_MAX_CHARS)

REQUEST_ID: ContextVar[str | None] = ContextVar("quire_request_id", default=None)


def new_request_id() -> str:
    """A fresh id: 32 random hex digits. An id names a request in logs and answers; it
    guards nothing, so it comes from ``random`` (reseeded in a forked child), cheaper
    than ``os.urandom``'s system call, which showed in the gateway's loop under load
    (benchmarks/README.md, "Measured choices")."""
    return _random_bits(128).to_bytes(16).hex()


def is_sane(raw: bytes) -> bool:
    """Whether ``raw`` may be used as a request id as it is."""
    return _SANE.fullmatch(raw) is not None


def request_id_from(raw: bytes | None) -> str:
    """The id of a request whose ``X-Request-Id`` header is ``raw`` (None: absent):
    ``raw`` itself when sane, else a new id."""
    if raw is not None and _SANE.fullmatch(raw) is not None:
        return raw.decode("ascii")
    return new_request_id()


def current_request_id() -> str | None:
    """The id of the request being served, or None outside any request."""
    return REQUEST_ID.get()


def scope_request_id(scope: Mapping[str, Any]) -> str:
    """The id of the request of an ASGI ``scope``: the one the access middleware chose,
    else its sane ``X-Request-Id``, else a new one."""
    chosen = scope.get(REQUEST_ID_SCOPE_KEY)
    if isinstance(chosen, str):
        return chosen
    raw = next((v for n, v in scope.get("headers", ()) if n == REQUEST_ID_HEADER_RAW), None)
    return request_id_from(raw)
