"""Ids and integers in paths and queries are canonical decimal integers (anything else is
400, so that one ledger has one URL), the OpenAPI document still types them as integers,
and a gateway that is not connected yet answers /health 503 and /v1/ calls 503
unavailable (gateway/http/deps.py, gateway/app.py), without processes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient

from gateway.app import create_app
from gateway.metadata_cache import MetadataCache
from gateway.metrics import GatewayMetrics
from services.errors import LedgerNotFound
from services.settings import GatewaySettings

ID_MAX = 2**63 - 1
NOT_CANONICAL = ["1.0", "+1", "%201", "1%20", "01", "00", "-0", "1e0", "0x1", "1_0", "１"]


class Ledgers:
    connected = True

    async def get(self, ledger_id: int):  # type: ignore[no-untyped-def]
        raise LedgerNotFound(f"no ledger {ledger_id}")

    async def list(self, after, limit):  # type: ignore[no-untyped-def]
        return [], None


@pytest.fixture(scope="module")
def client() -> TestClient:
    app = create_app(GatewaySettings())
    # No lifespan: a stand-in gateway whose ledgers all do not exist.
    ledgers = Ledgers()
    app.state.gateway = SimpleNamespace(
        ctx=SimpleNamespace(ledgers=ledgers, store=SimpleNamespace(connected=True)),
        metadata=MetadataCache(ledgers, GatewayMetrics().metadata_cache_hits),  # type: ignore[arg-type]
        handles=SimpleNamespace(get=lambda _: None, live=lambda _: None),
    )
    return TestClient(app)


def _paths(lid: str) -> list[tuple[str, str]]:
    return [
        ("GET", f"/v1/ledgers/{lid}"),
        ("DELETE", f"/v1/ledgers/{lid}"),
        ("POST", f"/v1/ledgers/{lid}/close"),
        ("POST", f"/v1/ledgers/{lid}/recover"),
        ("GET", f"/v1/ledgers/{lid}/lac"),
        ("GET", f"/v1/ledgers/{lid}/entries"),
        ("GET", f"/v1/ledgers/{lid}/entries/0"),
        ("GET", f"/v1/ledgers/0/entries/{lid}"),
    ]


@pytest.mark.parametrize(("method", "path"), [c for bad in NOT_CANONICAL for c in _paths(bad)])
def test_non_canonical_ids_are_400(client: TestClient, method: str, path: str) -> None:
    """1.0, +1, ' 1', 01 … name no ledger: 400 invalid_argument, not ledger 1."""
    r = client.request(method, path)
    assert r.status_code == 400, (path, r.text)
    assert r.json()["error"] == "invalid_argument"


@pytest.mark.parametrize("lid", ["0", "1", str(ID_MAX)])
def test_canonical_ids_reach_the_route(client: TestClient, lid: str) -> None:
    """Canonical ids, 0 and 2^63-1 included, are looked up (here: 404)."""
    r = client.get(f"/v1/ledgers/{lid}")
    assert r.status_code == 404 and r.json()["error"] == "ledger_not_found", r.text


QUERIES = [
    ("/v1/ledgers", "limit"),
    ("/v1/ledgers", "after"),
    ("/v1/ledgers/1/lac", "after"),
    ("/v1/ledgers/1/lac", "wait_ms"),
    ("/v1/ledgers/1/entries", "from"),
    ("/v1/ledgers/1/entries", "to"),
]


@pytest.mark.parametrize(("path", "name"), QUERIES)
@pytest.mark.parametrize("value", ["1.0", "+1", " 1", "01", "1e3", str(2**63), "-01"])
def test_non_canonical_query_integers_are_400(
    client: TestClient, path: str, name: str, value: str
) -> None:
    """Integer query parameters are canonical too (and within 64 bits)."""
    r = client.get(path, params={name: value, **({"after": "0"} if name == "wait_ms" else {})})
    assert r.status_code == 400, r.text
    assert r.json()["error"] == "invalid_argument"


def test_canonical_query_integers_are_accepted(client: TestClient) -> None:
    """-1 where the bound allows it, 0 and plain numbers pass the check."""
    assert client.get("/v1/ledgers", params={"after": "-1", "limit": "10"}).status_code == 200
    r = client.get("/v1/ledgers/1/lac", params={"after": "-1", "wait_ms": "0"})
    assert r.status_code == 404, r.text


def test_openapi_keeps_integer_types(client: TestClient) -> None:
    """The validators leave the documented parameter types alone."""
    doc = client.get("/openapi.json").json()
    params = doc["paths"]["/v1/ledgers/{ledger_id}/entries/{entry_id}"]["get"]["parameters"]
    by_name = {p["name"]: p["schema"] for p in params}
    for name in ("ledger_id", "entry_id"):
        assert by_name[name]["type"] == "integer"
        assert (by_name[name]["minimum"], by_name[name]["maximum"]) == (0, ID_MAX)


def test_not_ready_is_503_unavailable() -> None:
    """Before the lifespan connected: /health 503, /metrics 200, /v1/ calls 503
    unavailable with a message that says why (not a 500)."""
    client = TestClient(create_app(GatewaySettings()))
    assert client.get("/health").status_code == 503
    assert client.get("/metrics").status_code == 200
    for method, path in [("GET", "/v1/ledgers"), ("POST", "/v1/ledgers"), *_paths("1")]:
        r = client.request(method, path)
        assert r.status_code == 503, (path, r.text)
        assert r.json()["error"] == "unavailable"
        assert "ZooKeeper" in r.json()["message"]
