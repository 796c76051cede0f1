"""docs/api.md states the REST contract: every operation each service's OpenAPI document
serves (openapi/*.json, kept equal to the served documents by
tests/unit/web/test_openapi_contract.py) has its ``#### METHOD /path`` section under the
service's heading, and the reference documents nothing that is not served."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
API_DOC = REPO / "docs" / "api.md"
SERVICES = {
    "Gateway": "gateway",
    "Bookie": "bookie",
    "Auditor": "auditor",
    "Replicator": "replicator",
}
METHODS = ("get", "put", "post", "delete", "patch")
OPERATION = re.compile(r"^#{3,4} (GET|PUT|POST|DELETE|PATCH) (/\S*)\s*$")


def documented() -> dict[str, set[tuple[str, str]]]:
    found: dict[str, set[tuple[str, str]]] = {name: set() for name in SERVICES.values()}
    service = None
    for line in API_DOC.read_text().splitlines():
        if line.startswith("## "):
            service = SERVICES.get(line[3:].strip())
        elif (match := OPERATION.match(line)) and service is not None:
            found[service].add((match.group(1), match.group(2)))
    return found


def served(service: str) -> set[tuple[str, str]]:
    document = json.loads((REPO / "openapi" / f"{service}.json").read_text())
    return {
        (method.upper(), path)
        for path, item in document["paths"].items()
        for method in item
        if method in METHODS
    }


@pytest.mark.parametrize("service", sorted(SERVICES.values()))
def test_the_reference_lists_every_operation_a_service_serves(service: str) -> None:
    missing = served(service) - documented()[service]
    assert not missing, f"docs/api.md lacks {sorted(missing)}"


@pytest.mark.parametrize("service", sorted(SERVICES.values()))
def test_the_reference_lists_nothing_a_service_does_not_serve(service: str) -> None:
    extra = documented()[service] - served(service)
    assert not extra, f"docs/api.md documents {sorted(extra)}, which is not served"


def test_the_reference_has_a_section_per_service() -> None:
    assert all(documented()[service] for service in SERVICES.values())


def test_the_reference_names_the_gateway_s_websocket_routes() -> None:
    """WebSockets have no OpenAPI operation; the reference names each route the gateway
    serves one on."""
    from starlette.routing import WebSocketRoute

    from gateway.streams import routes as stream

    paths = [r.path for r in stream.router.routes if isinstance(r, WebSocketRoute)]
    assert paths, "the gateway serves no WebSocket route"
    text = API_DOC.read_text()
    assert [p for p in paths if f"`{p}`" not in text] == []
