"""The error registry of services/errors.py: one class per code, every code registered
as soon as services.errors is imported, and a clash refused at class creation."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from services import errors
from services.errors import InvariantViolation, QuireError, error_for_code

# Every error code docs/api.md lists ("Errors" table) with its status, and the codes other
# services answer with or clients map back (cookie checks, the bookie's read-only mode).
API_CODES = {
    "invalid_argument": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "ledger_not_found": 404,
    "entry_not_found": 404,
    "log_not_found": 404,
    "cursor_not_found": 404,
    "bookie_not_found": 404,
    "not_found": 404,
    "method_not_allowed": 405,
    "ledger_closed": 409,
    "ledger_fenced": 409,
    "not_writer": 409,
    "metadata_conflict": 409,
    "idempotency_key_reused": 409,
    "position_mismatch": 412,
    "payload_too_large": 413,
    "not_enough_bookies": 503,
    "unavailable": 503,
    "metadata_unavailable": 503,
    "bookie_unavailable": 503,
    "quorum_timeout": 504,
}
OTHER_CODES = {
    "internal": 500,
    "conflict": 409,
    "cookie_mismatch": 409,
    "entry_exists": 409,
    "bookie_read_only": 503,
    "bookie_running": 409,
    "data_dir_in_use": 409,
    "node_not_found": 404,
    "node_exists": 409,
    "node_not_empty": 409,
    "gateway_unreachable": 500,
    "stream_broken": 500,
    "ledger_in_log": 409,
    "log_ledger_missing": 500,
}

# Run in a fresh interpreter that imports nothing of Quire but services.errors.
_ALONE = """
import json, sys
from services.errors import ERRORS_BY_CODE, error_for_code
codes = json.loads(sys.argv[1])
found = {code: [error_for_code(code).code, error_for_code(code).http_status] for code in codes}
quire = sorted(m for m in sys.modules if m.split(".")[0] in ("services", "bookie", "gateway"))
print(json.dumps({"found": found, "registered": sorted(ERRORS_BY_CODE), "modules": quire}))
"""


def test_every_code_is_registered_by_importing_services_errors_alone() -> None:
    """A process that imports only services.errors maps every docs/api.md code (and
    cookie_mismatch, bookie_read_only, node_* ...) to its class and status, and
    registers exactly the codes this process knows after importing every service."""
    import bookie.app  # noqa: F401 - every module that used to define an error class
    import gateway.app  # noqa: F401
    import services.cli.app  # noqa: F401
    import services.zk.store  # noqa: F401

    codes = {**API_CODES, **OTHER_CODES}
    out = subprocess.run(
        [sys.executable, "-c", _ALONE, json.dumps(sorted(codes))],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    alone = json.loads(out.stdout)
    # services.native: the package's own start-up (the compiled add path), no error class.
    assert alone["modules"] == ["services", "services.errors", "services.native"]
    assert alone["found"] == {code: [code, status] for code, status in codes.items()}
    assert alone["registered"] == sorted(errors.ERRORS_BY_CODE)
    assert set(errors.ERRORS_BY_CODE) == set(codes)


def test_every_class_is_registered_under_its_own_code() -> None:
    """The registry maps each code to the one class that declares it, all defined in
    services.errors; an unknown code is QuireError."""
    for code, cls in errors.ERRORS_BY_CODE.items():
        assert cls.code == code and "code" in vars(cls)
        assert cls.__module__ == "services.errors"
        assert error_for_code(code) is cls
    assert error_for_code("no_such_code") is QuireError
    assert error_for_code("") is QuireError


def test_a_duplicate_code_is_refused_at_class_creation() -> None:
    """Declaring a second class with a taken code fails when the class is created, and
    the registry still answers with the first class."""
    before = dict(errors.ERRORS_BY_CODE)
    with pytest.raises(InvariantViolation, match="ledger_fenced.*taken by LedgerFenced"):

        class Fenced(errors.Conflict):
            code = "ledger_fenced"

    assert error_for_code("ledger_fenced") is errors.LedgerFenced
    assert dict(errors.ERRORS_BY_CODE) == before


def test_a_class_must_declare_its_code_and_live_in_services_errors() -> None:
    """A subclass that inherits its parent's code, or one defined in another module, is
    refused: either would make error_for_code's answer depend on what was imported."""
    before = dict(errors.ERRORS_BY_CODE)
    with pytest.raises(InvariantViolation, match="must declare its own code"):

        class NoCode(errors.NotFound):
            pass

    with pytest.raises(InvariantViolation, match="must be defined in services.errors"):

        class Elsewhere(errors.Conflict):
            code = "elsewhere_only"

    assert dict(errors.ERRORS_BY_CODE) == before
    assert error_for_code("elsewhere_only") is QuireError


def test_registry_is_read_only() -> None:
    """ERRORS_BY_CODE cannot be changed from outside (only class creation fills it)."""
    with pytest.raises(TypeError):
        errors.ERRORS_BY_CODE["mine"] = QuireError  # type: ignore[index]
