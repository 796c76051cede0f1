"""Examples on the gateway's main operations in its OpenAPI document: what a request and
its answer look like, per media type, so a reader (and a generated client's docs) sees
the shapes at once. A test validates every example against its schema."""

from __future__ import annotations

from typing import Any

JSON = "application/json"
RAW = "application/octet-stream"
NDJSON = "application/x-ndjson"

_LEDGER = {
    "ledger_id": 7,
    "state": "OPEN",
    "ensemble_size": 3,
    "write_quorum": 2,
    "ack_quorum": 2,
    "digest": "crc32c",
    "metadata": {"app": "orders"},
    "last_entry_id": None,
    "length": 0,
    "created_at": 1795622400000,
    "fragments": [
        {"first_entry_id": 0, "bookies": ["10.0.0.1:3181", "10.0.0.2:3181", "10.0.0.3:3181"]}
    ],
}
_CLOSED = {**_LEDGER, "state": "CLOSED", "last_entry_id": 2, "length": 16}
_POSITION = {"ledger_id": 7, "entry_id": 3}

# operationId -> ("request" | status code) -> media type -> example
EXAMPLES: dict[str, dict[str, dict[str, Any]]] = {
    "create_ledger": {
        "request": {
            JSON: {
                "ensemble_size": 3,
                "write_quorum": 2,
                "ack_quorum": 2,
                "metadata": {"app": "orders"},
            }
        },
        "201": {JSON: _LEDGER},
    },
    "get_ledger": {
        "200": {JSON: _CLOSED},
        "404": {JSON: {"error": "ledger_not_found", "message": "no ledger 7"}},
    },
    "close_ledger": {"200": {JSON: _CLOSED}},
    "add_entries": {
        "request": {JSON: {"entries": ["aGVsbG8=", "d29ybGQ="]}, RAW: "hello"},
        "200": {JSON: {"first_entry_id": 1, "last_entry_id": 2, "last_add_confirmed": 2}},
    },
    "read_entries": {
        "200": {
            JSON: {
                "entries": [
                    {"entry_id": 0, "data": "aGVsbG8="},
                    {"entry_id": 1, "data": "d29ybGQ="},
                ],
                "next": 2,
                "last_add_confirmed": 4,
            },
            NDJSON: '{"entry_id":0,"data":"aGVsbG8="}\n{"entry_id":1,"data":"d29ybGQ="}\n',
        }
    },
    "get_lac": {"200": {JSON: {"last_add_confirmed": 4}}},
    "create_log": {
        "request": {JSON: {"retention": {"max_age_s": 604800, "max_bytes": 10737418240}}},
        "201": {
            JSON: {
                "name": "orders",
                "ledgers": [],
                "writer": None,
                "retention": {
                    "max_age_s": 604800,
                    "max_bytes": 10737418240,
                    "max_records": None,
                    "retain_for_cursors": False,
                    "max_backlog_bytes": None,
                },
            }
        },
    },
    "patch_log": {
        "request": {JSON: {"retention": {"max_bytes": None, "retain_for_cursors": True}}},
    },
    "take_writer": {"200": {JSON: {"epoch": 2, "ledger_id": 7}}},
    "append_records": {
        "request": {JSON: {"entries": ["b3JkZXIgNDI=", "b3JkZXIgNDM="]}, RAW: "order 42"},
        "200": {JSON: {"first_position": _POSITION, "last_position": {**_POSITION, "entry_id": 4}}},
    },
    "read_records": {
        "200": {
            JSON: {
                "records": [{"position": _POSITION, "data": "b3JkZXIgNDI=", "time": 1795946400000}],
                "next": "7:4",
                "caught_up": True,
            }
        }
    },
    "get_cluster": {
        "200": {
            JSON: {
                "auditor_elected": True,
                "auditor_id": "10.0.0.9:8091",
                "replication_enabled": True,
                "under_replicated_ledgers": 0,
                "bookies": {"writable": 4, "readonly": 0, "unavailable": 0},
                "racks": {"rack-a": 2, "rack-b": 1, "rack-c": 1},
                "placement_violations": 0,
            }
        }
    },
}


def add_examples(doc: dict[str, Any]) -> None:
    """Put ``EXAMPLES`` into the document, next to each media type's schema."""
    operations = {
        op["operationId"]: op for item in doc.get("paths", {}).values() for op in item.values()
    }
    for operation_id, parts in EXAMPLES.items():
        operation = operations[operation_id]
        for part, media in parts.items():
            body = operation["requestBody"] if part == "request" else operation["responses"][part]
            for media_type, example in media.items():
                body["content"][media_type]["example"] = example
