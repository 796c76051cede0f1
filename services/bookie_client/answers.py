"""What a bookie's answer bodies become: error answers as ``QuireError``s, JSON
documents as results (``BookieClient`` wraps a parse failure as ``BookieUnavailable``:
a malformed answer)."""

from __future__ import annotations

import json
from typing import Any

from services.bookie_client.results import BookieAddResult, LacInfo, StoredInfo
from services.bookie_client.transport import HttpResponse
from services.errors import (
    BookieUnavailable,
    Conflict,
    InvalidArgument,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    QuireError,
    Unauthorized,
    error_for_code,
)

_BY_STATUS: dict[int, type[QuireError]] = {
    400: InvalidArgument,
    401: Unauthorized,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: PayloadTooLarge,
}


def error_for(status: int, body: bytes, prefix: str) -> QuireError:
    """The error of an answer with ``status`` >= 400 (docs/api.md: ``{"error", "message"}``);
    ``prefix`` names the bookie and the call. An unknown code or a bare failure with a
    5xx status is ``BookieUnavailable``."""
    code = message = None
    try:
        doc = json.loads(body)
        if isinstance(doc, dict) and isinstance(doc.get("error"), str):
            code, message = doc["error"], doc.get("message")
    except ValueError:
        pass
    if code is not None:
        cls = error_for_code(code)
        if status >= 500 and cls is QuireError:
            # "internal" or a code we do not know: the bookie failed.
            cls = BookieUnavailable
        return cls(f"{prefix}: {message or code}")
    if status >= 500:
        return BookieUnavailable(f"{prefix}: HTTP {status} without an error body")
    return _BY_STATUS.get(status, QuireError)(f"{prefix}: HTTP {status}")


def parse_add(doc: dict[str, Any], instance_id: str | None = None) -> BookieAddResult:
    """An add answer (``stored`` and the ``rejected`` records with their codes) from the
    bookie instance ``instance_id`` (its answer's instance header); raises
    KeyError/TypeError/ValueError/AttributeError."""
    rejected = [
        (int(r["ledger_id"]), int(r["entry_id"]), str(r["error"])) for r in doc.get("rejected", [])
    ]
    return BookieAddResult(int(doc["stored"]), rejected, instance_id)


def parse_lac(doc: dict[str, Any]) -> LacInfo:
    """A LAC read, LAC update or fence answer; raises KeyError/TypeError/ValueError."""
    instance = doc.get("instance_id")
    return LacInfo(
        int(doc["ledger_id"]),
        int(doc["lac"]),
        int(doc["last_entry_id"]),
        bool(doc["fenced"]),
        int(doc.get("length", -1)),
        int(doc.get("lac_length", -1)),
        None if instance is None else str(instance),
    )


def parse_stored(doc: Any) -> StoredInfo:
    """One ledger of a stored-entries answer (``known`` is absent from single-ledger
    answers: a ledger that is not known there is a 404); raises like ``parse_lac``."""
    ranges = tuple((int(first), int(last)) for first, last in doc["ranges"])
    if any(first > last for first, last in ranges) or any(
        a[1] >= b[0] for a, b in zip(ranges, ranges[1:], strict=False)
    ):
        raise ValueError("ranges not ascending and disjoint")
    return StoredInfo(
        int(doc["ledger_id"]),
        bool(doc.get("known", True)),
        ranges,
        int(doc["entries"]),
        int(doc["last_entry_id"]),
        bool(doc["fenced"]),
        int(doc["checked"]),
        tuple(int(e) for e in doc["corrupt"]),
        bool(doc.get("truncated", False)),
    )


INSTANCE_HEADER = "x-quire-bookie-instance"


def answer_error(address: str, response: HttpResponse, what: str) -> QuireError:
    """The ``QuireError`` for an error answer (docs/api.md: ``{"error", "message"}``), with
    the answering bookie's instance id in ``bookie_instance_id`` (None if absent):
    recovery must not count a "not found" from a reformatted bookie as missing."""
    error = error_for(response.status, response.body, f"bookie {address}: {what}")
    error.bookie_instance_id = response.headers.get(INSTANCE_HEADER)  # type: ignore[attr-defined]
    return error


def transport_error(address: str, exc: Exception, what: str, timeout_s: float) -> BookieUnavailable:
    """The ``BookieUnavailable`` of a transport failure (a time-out, a refused or reset
    connection, an answer that is not HTTP/1.1 as we read it), caused by ``exc``."""
    if isinstance(exc, TimeoutError):
        message = f"no answer within {timeout_s:g}s"
    else:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        message = f"{type(exc).__name__}: {reason}"
    error = BookieUnavailable(f"bookie {address}: {what}: {message}")
    error.__cause__ = exc
    return error


def malformed(address: str, what: str, exc: Exception) -> BookieUnavailable:
    return BookieUnavailable(f"bookie {address}: {what}: malformed answer ({exc})")
