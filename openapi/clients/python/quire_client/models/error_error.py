from enum import StrEnum


class ErrorError(StrEnum):
    BOOKIE_NOT_FOUND = "bookie_not_found"
    BOOKIE_READ_ONLY = "bookie_read_only"
    BOOKIE_UNAVAILABLE = "bookie_unavailable"
    CONFLICT = "conflict"
    CURSOR_NOT_FOUND = "cursor_not_found"
    ENTRY_EXISTS = "entry_exists"
    ENTRY_NOT_FOUND = "entry_not_found"
    FORBIDDEN = "forbidden"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    INTERNAL = "internal"
    INVALID_ARGUMENT = "invalid_argument"
    LEDGER_CLOSED = "ledger_closed"
    LEDGER_FENCED = "ledger_fenced"
    LEDGER_IN_LOG = "ledger_in_log"
    LEDGER_NOT_FOUND = "ledger_not_found"
    LOG_LEDGER_MISSING = "log_ledger_missing"
    LOG_NOT_FOUND = "log_not_found"
    METADATA_CONFLICT = "metadata_conflict"
    METADATA_UNAVAILABLE = "metadata_unavailable"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    NOT_ENOUGH_BOOKIES = "not_enough_bookies"
    NOT_FOUND = "not_found"
    NOT_WRITER = "not_writer"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    POSITION_MISMATCH = "position_mismatch"
    QUORUM_TIMEOUT = "quorum_timeout"
    UNAUTHORIZED = "unauthorized"
    UNAVAILABLE = "unavailable"

    def __str__(self) -> str:
        return str(self.value)
