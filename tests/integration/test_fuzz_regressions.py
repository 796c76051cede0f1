"""Regression tests for what the schemathesis runs (tests/integration/test_schemathesis.py)
found, against a real gateway and a real bookie on 127.0.0.1, each checked the way
schemathesis checked it (the served document loaded by schemathesis, the answer
validated by it) and by hand: a bookie's ``stored`` answer conforms to its document (its
``ranges`` were a ``prefixItems`` tuple schemathesis could not validate against); an
integer query parameter's document states the bound the gateway enforces (2^63-1: a
larger ``limit`` or ``wait_ms`` is 400), a position in a query states its ``LID:EID``
pattern; the gateway's links name real operations and parameters; and a bookie's disk
threshold takes only a number (false was read as 0.0)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import schemathesis

from services.cluster.processes import ServiceProcess, poll_client
from services.limits import ID_MAX
from tests.integration.gateway_support import (
    Gateway,
    assert_error,
    closed_ledger_and_log,
    module_cluster,
    ok,
    start_bookies,
    start_gateway,
    wait_writable,
)

LOG = "regress-log"


@dataclass
class Env:
    gateway: Gateway
    bookie: ServiceProcess
    ledger_id: int  # a closed ledger with two entries on the one bookie


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    with module_cluster(zookeeper, tmp_path_factory.mktemp("fuzz-regressions")) as cluster:
        (bookie,) = start_bookies(cluster, 1)
        gateway = start_gateway(cluster)
        try:
            wait_writable(gateway, 1)
            ledger_id = closed_ledger_and_log(gateway, LOG)
            yield Env(gateway, bookie, ledger_id)
        finally:
            gateway.close_client()


def served(url: str) -> dict[str, Any]:
    r = poll_client().get(f"{url}/openapi.json", timeout=10.0)
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()
    return doc


def test_stored_answers_conform_to_the_bookie_document(env: Env) -> None:
    """GET and POST of a bookie's ``stored`` answer ``ranges`` of [first, last] pairs, and
    schemathesis validates both answers against the served document (it failed with
    "Invalid Schema Object" while ``ranges`` was a ``prefixItems`` tuple)."""
    schema = schemathesis.openapi.from_url(f"{env.bookie.url}/openapi.json")
    lid = env.ledger_id
    one = schema["/v1/ledgers/{ledger_id}/stored"]["GET"].Case(path_parameters={"ledger_id": lid})
    answer = one.call_and_validate(base_url=env.bookie.url)
    assert answer.json()["ranges"] == [[0, 1]]
    many = schema["/v1/stored"]["POST"].Case(
        body={"ledger_ids": [lid, lid + 1_000_000]}, media_type="application/json"
    )
    answer = many.call_and_validate(base_url=env.bookie.url)
    assert [x["ranges"] for x in answer.json()["ledgers"]] == [[[0, 1]], []]
    ranges = served(env.bookie.url)["components"]["schemas"]["StoredLedger"]["properties"]["ranges"]
    assert "prefixItems" not in ranges["items"]
    assert (ranges["items"]["minItems"], ranges["items"]["maxItems"]) == (2, 2)


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/v1/ledgers", "limit"),
        ("/v1/logs", "limit"),
        ("/v1/admin/under-replicated", "limit"),
        ("/v1/logs/{name}/records", "limit"),
        ("/v1/logs/{name}/records", "wait_ms"),
        ("/v1/ledgers/{ledger_id}/lac", "wait_ms"),
    ],
)
def test_integer_queries_document_their_bound(env: Env, path: str, name: str) -> None:
    """``limit`` and ``wait_ms`` are documented up to 2^63-1, which the gateway takes
    (clamped); 2^63 is 400 invalid_argument (it was documented without a maximum, so
    schemathesis sent valid-looking values of 26 digits that were refused)."""
    param = next(
        p for p in served(env.gateway.url)["paths"][path]["get"]["parameters"] if p["name"] == name
    )
    assert param["schema"]["maximum"] == ID_MAX
    url = path.replace("{name}", LOG).replace("{ledger_id}", str(env.ledger_id))
    extra = {"after": "0"} if name == "wait_ms" and "lac" in path else {}
    r = env.gateway.request("GET", url, params={name: str(ID_MAX), **extra})
    assert r.status_code == 200, r.text
    r = env.gateway.request("GET", url, params={name: str(ID_MAX + 1), **extra})
    assert_error(r, 400, "invalid_argument")


def test_positions_in_queries_document_their_pattern(env: Env) -> None:
    """``from`` of a log read and ``before`` of a truncation are documented with the
    ``LID:EID`` pattern the gateway parses: a position that matches it is read, text that
    does not is 400 invalid_argument (they were documented as any string)."""
    doc = served(env.gateway.url)["paths"]
    params = {
        "from": doc["/v1/logs/{name}/records"]["get"]["parameters"],
        "before": doc["/v1/logs/{name}/truncate"]["post"]["parameters"],
    }
    patterns = {
        name: next(p for p in listed if p["name"] == name)["schema"]["pattern"]
        for name, listed in params.items()
    }
    for name, pattern in patterns.items():
        assert re.fullmatch(pattern, "12:0") and re.fullmatch(pattern, f"{ID_MAX}:{ID_MAX}")
        for bad in ("", "1", "1:", "01:0", "-1:0", "1:0:0", "a:b", "1:" + "9" * 20):
            assert not re.fullmatch(pattern, bad), (name, bad)
    page = ok(env.gateway.request("GET", f"/v1/logs/{LOG}/records"))
    position = page["records"][0]["position"]
    first = f"{position['ledger_id']}:{position['entry_id']}"
    assert re.fullmatch(patterns["from"], first) and re.fullmatch(patterns["from"], page["next"])
    again = ok(env.gateway.request("GET", f"/v1/logs/{LOG}/records", params={"from": first}))
    assert again["records"] == page["records"]
    r = env.gateway.request("GET", f"/v1/logs/{LOG}/records", params={"from": "a:b"})
    assert_error(r, 400, "invalid_argument")


def test_links_name_real_operations_and_parameters(env: Env) -> None:
    """Every link of the served gateway document names an operation of it and only
    parameters that operation has, with runtime expressions of the answer or request;
    the create-ledger and create-log answers lead to append, read and close."""
    doc = served(env.gateway.url)
    operations = {op["operationId"]: op for item in doc["paths"].values() for op in item.values()}
    seen = 0
    for op in operations.values():
        for response in op["responses"].values():
            for link in response.get("links", {}).values():
                target = operations[link["operationId"]]
                names = {p["name"] for p in target.get("parameters", [])}
                for name, expression in link["parameters"].items():
                    assert name in names, (link, names)
                    assert re.fullmatch(
                        r"\$(response\.body#/[a-z_/0-9]+|request\.path\.\w+)", expression
                    )
                seen += 1
    assert seen >= 20
    created = operations["create_ledger"]["responses"]["201"]["links"]
    assert {"add_entries", "read_entries", "close_ledger"} <= {
        link["operationId"] for link in created.values()
    }
    log = operations["create_log"]["responses"]["201"]["links"]
    assert {"take_writer", "append_records", "read_records"} <= {
        link["operationId"] for link in log.values()
    }


def test_disk_threshold_takes_only_a_number(env: Env) -> None:
    """A bookie's read-only threshold is a number as documented: false, true and "0.5"
    are 400 invalid_argument and change nothing (pydantic read false as 0.0 and answered
    200, which schemathesis reported as invalid input accepted); 0 and 0.05 are taken."""
    with httpx.Client(base_url=env.bookie.url, timeout=10.0) as bookie:
        path = "/v1/admin/disk-threshold"
        ok(bookie.post(path, json={"readonly_free_ratio": 0.05}))
        for bad in (False, True, "0.5", None):
            r = bookie.post(path, json={"readonly_free_ratio": bad})
            assert_error(r, 400, "invalid_argument")
            assert ok(bookie.get("/v1/info"))["readonly_free_ratio"] == 0.05
        assert ok(bookie.post(path, json={"readonly_free_ratio": 0}))["readonly_free_ratio"] == 0
        ok(bookie.post(path, json={"readonly_free_ratio": 0.05}))
