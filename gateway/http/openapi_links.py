"""The OpenAPI links of the gateway's document: which answer feeds which next call.

They state the main flows of docs/api.md for readers, generated clients and stateful fuzzers
(tests/integration/test_schemathesis.py follows them): a created ledger is appended to,
read and closed by its id; an added entry is read back by the ledger's LAC; a created
log (or one listed) gets a writer, records appended and read by its name. Keyed by
operation id, then by answer status; ``services.web.openapi.install_openapi`` checks
that every operation named exists.
"""

from __future__ import annotations

from typing import Any

LEDGER_ID = {"ledger_id": "$response.body#/ledger_id"}
SAME_LEDGER = {"ledger_id": "$request.path.ledger_id"}
SAME_LOG = {"name": "$request.path.name"}
FIRST_LOG = {"name": "$response.body#/logs/0"}


def _link(operation_id: str, parameters: dict[str, str], description: str) -> dict[str, Any]:
    return {"operationId": operation_id, "parameters": parameters, "description": description}


def _ledger_links(parameters: dict[str, str]) -> dict[str, Any]:
    """What can be done next with a ledger named by ``parameters``."""
    return {
        "AddEntries": _link("add_entries", parameters, "append to this ledger"),
        "ReadEntries": _link("read_entries", parameters, "read this ledger's entries"),
        "GetLac": _link("get_lac", parameters, "this ledger's last add confirmed"),
        "GetLedger": _link("get_ledger", parameters, "this ledger's metadata"),
        "CloseLedger": _link("close_ledger", parameters, "close this ledger (its writer)"),
        "RecoverLedger": _link("recover_ledger", parameters, "recover and close this ledger"),
        "DeleteLedger": _link("delete_ledger", parameters, "delete this ledger"),
    }


def _log_links() -> dict[str, Any]:
    """What can be done next with the log of the request's path."""
    return {
        "TakeWriter": _link("take_writer", SAME_LOG, "become this log's writer"),
        "AppendRecords": _link("append_records", SAME_LOG, "append to this log (its writer)"),
        "ReadRecords": _link("read_records", SAME_LOG, "read this log from its start"),
        "GetLog": _link("get_log", SAME_LOG, "this log's ledgers and writer"),
        "RollLog": _link("roll_log", SAME_LOG, "start a new ledger (its writer)"),
        "DeleteLog": _link("delete_log", SAME_LOG, "delete this log"),
    }


LINKS: dict[str, dict[str, dict[str, Any]]] = {
    "create_ledger": {"201": _ledger_links(LEDGER_ID)},
    "add_entries": {
        "200": {
            **_ledger_links(SAME_LEDGER),
            "ReadLastEntry": _link(
                "read_entry",
                {**SAME_LEDGER, "entry_id": "$response.body#/last_add_confirmed"},
                "read back the last entry confirmed",
            ),
        }
    },
    "create_log": {"200": _log_links(), "201": _log_links()},
    "list_logs": {
        "200": {
            "CreateLog": _link(
                "create_log", FIRST_LOG, "declare the first log listed again (200: exists)"
            ),
            "TakeWriter": _link("take_writer", FIRST_LOG, "become the first log's writer"),
            "ReadRecords": _link("read_records", FIRST_LOG, "read the first log listed"),
            "GetLog": _link("get_log", FIRST_LOG, "the first log's ledgers and writer"),
        }
    },
    "take_writer": {
        "200": {
            "AppendRecords": _link("append_records", SAME_LOG, "append as the new writer"),
            "ReadRecords": _link("read_records", SAME_LOG, "read this log from its start"),
            "ReadLedger": _link("read_entries", LEDGER_ID, "read the writer's new ledger"),
        }
    },
    "append_records": {
        "200": {
            "ReadRecords": _link("read_records", SAME_LOG, "read this log from its start"),
            "RollLog": _link("roll_log", SAME_LOG, "start a new ledger (its writer)"),
        }
    },
}
