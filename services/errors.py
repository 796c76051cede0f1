"""The one error hierarchy of Quire.

Every error a service reports to the world is a ``QuireError`` subclass that
carries the API.md error code and HTTP status. One FastAPI exception handler
(``install_error_handlers``) turns them into ``{"error", "message"}``; routes
never build error responses by hand. Clients map a code back to its class with
``error_for_code``. Adapters translate kazoo, httpx and SQLAlchemy exceptions
into this hierarchy at their boundary with ``raise ... from exc``.

    QuireError (500 internal)
    +-- InvalidArgument (400)
    +-- Unauthorized (401)
    +-- NotFound (404 not_found)
    |   +-- LedgerNotFound, EntryNotFound, LogNotFound, BookieNotFound
    +-- MethodNotAllowed (405)
    +-- Conflict (409)
    |   +-- LedgerClosed, LedgerFenced, EntryExists, NotWriter, MetadataConflict, CookieMismatch
    +-- PayloadTooLarge (413)
    +-- Unavailable (503, retriable)
    |   +-- NotEnoughBookies, BookieReadOnly, MetadataUnavailable, BookieUnavailable
    +-- QuorumTimeout (504, retriable)
"""

from __future__ import annotations

import logging
from typing import ClassVar

log = logging.getLogger(__name__)


class QuireError(Exception):
    code: ClassVar[str] = "internal"
    http_status: ClassVar[int] = 500
    retriable: ClassVar[bool] = False

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.__class__.__doc__ or self.code)

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.code

    def to_json(self) -> dict[str, str]:
        return {"error": self.code, "message": self.message}


class InvalidArgument(QuireError):
    """Bad parameters or a malformed body."""

    code, http_status = "invalid_argument", 400


class Unauthorized(QuireError):
    """Missing or wrong token, cluster secret or ledger password."""

    code, http_status = "unauthorized", 401


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


class BookieNotFound(NotFound):
    """No such bookie."""

    code = "bookie_not_found"


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


class CookieMismatch(Conflict):
    """The bookie's data directory does not match its cookie."""

    code = "cookie_mismatch"


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


def _all_subclasses(cls: type[QuireError]) -> list[type[QuireError]]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_all_subclasses(sub))
    return out


def error_for_code(code: str) -> type[QuireError]:
    """The error class for an API error code (``QuireError`` for an unknown one)."""
    for cls in _all_subclasses(QuireError):
        if cls.code == code:
            return cls
    return QuireError


class InvariantViolation(AssertionError):
    """A programmer error: a property the code relies on does not hold."""


def invariant(condition: object, message: str) -> None:
    """Check a property of our own code; unlike ``assert`` it survives ``python -O``."""
    if not condition:
        raise InvariantViolation(message)
