"""The one error hierarchy of Quire.

Every error a service reports to the world is a ``QuireError`` subclass that
carries the docs/api.md error code and HTTP status. One FastAPI exception handler
(``services.web.errors.install_error_handlers``) turns them into
``{"error", "message"}`` and ``services.web.errors.error_body`` is the one place
that body is built; routes and middlewares never build error responses by hand.
Clients map a code back to its class with ``error_for_code``. Adapters translate
kazoo, httpx and SQLAlchemy exceptions into this hierarchy at their boundary with
``raise ... from exc``.

Every class is defined in this module and registered by its code when it is
created (``QuireError.__init_subclass__``), so ``error_for_code`` gives the same
answer whatever else was imported. Each class declares its own code and no two
share one; a class that breaks either rule, or is defined in another module, fails
at its creation with ``InvariantViolation``.

    QuireError (500 internal)
    +-- InvalidArgument (400)
    +-- Unauthorized (401)
    +-- Forbidden (403)
    +-- NotFound (404 not_found)
    |   +-- LedgerNotFound, EntryNotFound, LogNotFound, CursorNotFound, BookieNotFound
    |   +-- NodeNotFound                      (metadata store)
    +-- MethodNotAllowed (405)
    +-- Conflict (409)
    |   +-- LedgerClosed, LedgerFenced, EntryExists, NotWriter, MetadataConflict,
    |   |   IdempotencyKeyReused, CookieMismatch, LedgerInLog
    |   +-- NodeExists, NodeNotEmpty           (metadata store)
    |   +-- BookieRunning, DataDirInUse        (bookie start-up and format)
    +-- PositionMismatch (412)                 (Expected-Last-Position is not the last record)
    +-- PayloadTooLarge (413)
    +-- Unavailable (503, retriable)
    |   +-- NotEnoughBookies, BookieReadOnly, MetadataUnavailable, BookieUnavailable
    +-- QuorumTimeout (504, retriable)
    +-- LogLedgerMissing (500)                 (a log lists a ledger that is gone)
    +-- GatewayUnreachable, StreamBroken       (the CLI's view of a gateway: 500)

The metadata-store errors (``node_*``) are the vocabulary of
``services.zk.store.MetadataStore``: its callers catch them to decide (a missing
znode is free, an existing one lost a race) and translate them into API errors
(``LedgerNotFound``, ``CookieMismatch``, ...) before anything answers a request.
They are not docs/api.md codes.

``invariant`` is for our own bugs (docs/style.md §4): unlike ``assert`` it survives
``python -O``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar

log = logging.getLogger(__name__)


T = TypeVar("T")


class InvariantViolation(AssertionError):
    """A programmer error: a property the code relies on does not hold."""


def invariant(condition: object, message: str) -> None:
    """Check a property of our own code; unlike ``assert`` it survives ``python -O``."""
    if not condition:
        raise InvariantViolation(message)


def present(value: T | None, message: str) -> T:
    """``value``, which our own code guarantees is not None here (an ``invariant`` that
    also tells the type checker so)."""
    if value is None:
        raise InvariantViolation(message)
    return value


# Every error class by its code, filled as the classes below are created.
_BY_CODE: dict[str, type[QuireError]] = {}

ERRORS_BY_CODE: Mapping[str, type[QuireError]] = MappingProxyType(_BY_CODE)
"""Every error class by its code (read-only): complete once this module is imported."""


def _register(cls: type[QuireError]) -> None:
    name = cls.__qualname__
    invariant("code" in cls.__dict__, f"error class {name} must declare its own code")
    owner = _BY_CODE.get(cls.code, cls)
    invariant(owner is cls, f"error code {cls.code!r} of {name} is taken by {owner.__qualname__}")
    invariant(
        cls.__module__ == __name__,
        f"error class {name} must be defined in {__name__} (it is in {cls.__module__}), "
        "so that error_for_code knows it whatever was imported",
    )
    _BY_CODE[cls.code] = cls


class QuireError(Exception):
    code: ClassVar[str] = "internal"
    http_status: ClassVar[int] = 500
    retriable: ClassVar[bool] = False
    # An add that failed with an unknown outcome: the entry ids it was given (first,
    # last). Set by the write handle's runner; never part of an answer.
    entries: tuple[int, int] | None = None
    # Fields of the answer beside "error" and "message" (e.g. a 412's "last_position"),
    # never secrets: they are shown to the caller.
    details: Mapping[str, Any] = MappingProxyType({})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _register(cls)

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.__class__.__doc__ or self.code)

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.code

    def to_json(self) -> dict[str, Any]:
        return {**self.details, "error": self.code, "message": self.message}


_register(QuireError)


def error_for_code(code: str) -> type[QuireError]:
    """The error class for an API error code (``QuireError`` for an unknown one)."""
    return _BY_CODE.get(code, QuireError)


def error_from_json(doc: Mapping[str, Any]) -> QuireError:
    """The error an answer's body ``{"error", "message", ...}`` states, with its other
    fields kept (another gateway's answer passed on unchanged: a forwarded append)."""
    cls = error_for_code(str(doc.get("error")))
    exc = cls.__new__(cls)
    Exception.__init__(exc, str(doc.get("message") or cls.code))
    exc.details = {k: v for k, v in doc.items() if k not in ("error", "message")}
    return exc


class InvalidArgument(QuireError):
    """Bad parameters or a malformed body."""

    code, http_status = "invalid_argument", 400


class Unauthorized(QuireError):
    """Missing or wrong token, cluster secret or ledger password."""

    code, http_status = "unauthorized", 401


class Forbidden(QuireError):
    """A known token whose scope does not allow the call (the gateway's token file)."""

    code, http_status = "forbidden", 403


class NotFound(QuireError):
    """No such route or object."""

    code, http_status = "not_found", 404


class LedgerNotFound(NotFound):
    """No such ledger."""

    code = "ledger_not_found"


class EntryNotFound(NotFound):
    """No such entry."""

    code = "entry_not_found"


class LogNotFound(NotFound):
    """No such log."""

    code = "log_not_found"


class CursorNotFound(NotFound):
    """No such cursor on the log (docs/api.md "Logs: cursors")."""

    code = "cursor_not_found"


class BookieNotFound(NotFound):
    """No such bookie."""

    code = "bookie_not_found"


class NodeNotFound(NotFound):
    """The znode does not exist (metadata store)."""

    code = "node_not_found"


class MethodNotAllowed(QuireError):
    """The route exists but not with this method."""

    code, http_status = "method_not_allowed", 405


class Conflict(QuireError):
    """The request conflicts with the current state."""

    code, http_status = "conflict", 409


class LedgerClosed(Conflict):
    """The ledger was closed by this writer."""

    code = "ledger_closed"


class LedgerFenced(Conflict):
    """The ledger was fenced or closed by someone else; the add's outcome is unknown:
    it may or may not have been written."""

    code = "ledger_fenced"


class EntryExists(Conflict):
    """The bookie already stores this entry with different bytes; nothing was changed."""

    code = "entry_exists"


class NotWriter(Conflict):
    """This gateway does not hold the write handle."""

    code = "not_writer"


class MetadataConflict(Conflict):
    """A compare-and-set on metadata lost and cannot be resolved."""

    code = "metadata_conflict"


class IdempotencyKeyReused(Conflict):
    """An ``Idempotency-Key`` seen in the dedup window with a different body."""

    code = "idempotency_key_reused"


class LedgerInLog(Conflict):
    """A log lists the ledger: it cannot be deleted (truncate the log, or delete the log)."""

    code = "ledger_in_log"


class CookieMismatch(Conflict):
    """The bookie's data directory does not match its cookie."""

    code = "cookie_mismatch"


class NodeExists(Conflict):
    """The znode exists already (metadata store)."""

    code = "node_exists"


class NodeNotEmpty(Conflict):
    """The znode has children (metadata store)."""

    code = "node_not_empty"


class BookieRunning(Conflict):
    """The bookie is registered or holds its data dir: stop it first."""

    code = "bookie_running"


class DataDirInUse(Conflict):
    """Another process holds the data dir."""

    code = "data_dir_in_use"


class PositionMismatch(QuireError):
    """An append's ``Expected-Last-Position`` is not the log's last record: nothing was
    appended. ``last_position`` is the actual one (``LID:EID``; None for a log with no
    record), shown in the answer."""

    code, http_status = "position_mismatch", 412

    def __init__(self, message: str | None = None, last_position: str | None = None) -> None:
        super().__init__(message)
        self.details = {"last_position": last_position}


class PayloadTooLarge(QuireError):
    """An entry, batch or body over its limit."""

    code, http_status = "payload_too_large", 413


class Unavailable(QuireError):
    """The service cannot serve the request now; retry later."""

    code, http_status, retriable = "unavailable", 503, True


class NotEnoughBookies(Unavailable):
    """Fewer writable bookies than needed."""

    code = "not_enough_bookies"


class BookieReadOnly(Unavailable):
    """The bookie is read-only and takes no adds."""

    code = "bookie_read_only"


class BookieUnavailable(Unavailable):
    """A bookie could not be reached or failed."""

    code = "bookie_unavailable"


class MetadataUnavailable(Unavailable):
    """ZooKeeper could not be reached."""

    code = "metadata_unavailable"


class QuorumTimeout(QuireError):
    """No ack quorum in time; the outcome is unknown."""

    code, http_status, retriable = "quorum_timeout", 504, True


class LogLedgerMissing(QuireError):
    """A log lists a ledger whose metadata is gone: a read stops there with this error
    rather than skip it (the records after it are not lost, but not readable in order)."""

    code = "log_ledger_missing"


class GatewayUnreachable(QuireError):
    """The gateway could not be reached (refused, reset, timed out)."""

    code = "gateway_unreachable"


class StreamBroken(QuireError):
    """A streamed answer ended before it was complete (the gateway failed mid-way)."""

    code = "stream_broken"
