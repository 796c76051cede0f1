"""Regression tests for the findings of issue 12's fuzzing run, against a real gateway and
a real bookie on 127.0.0.1: HEAD of every documented GET path answers like the GET
without a body; every 405 carries Allow with exactly the documented methods; the served
documents are valid OpenAPI 3.1 with an optional token; integral JSON numbers (1.0) are
integers in request bodies; from > to is 400 invalid_argument and documented so."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from openapi_spec_validator import validate

from services.cluster.processes import ServiceProcess, poll_client
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

HTTP_METHODS = ("get", "put", "post", "delete", "patch")
LOG = "fuzz-log"
CURSOR = "fuzz-cursor"
# Paths whose GET answers may change between two calls (counters, disk figures): their
# Content-Length is not compared.
VOLATILE = {"/metrics", "/v1/info", "/v1/admin/bookies", "/v1/admin/bookies/{bookie_id}"}


@dataclass
class Env:
    gateway: Gateway
    bookie: ServiceProcess
    ledger_id: int  # a CLOSED ledger with two entries, on the one bookie
    values: dict[str, str]  # a value for each path parameter of the documents


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    with module_cluster(zookeeper, tmp_path_factory.mktemp("fuzz-findings")) as cluster:
        (bookie,) = start_bookies(cluster, 1)
        gateway = start_gateway(cluster)
        try:
            wait_writable(gateway, 1)
            ledger_id = closed_ledger_and_log(gateway, LOG)
            ok(gateway.http.put(f"/v1/logs/{LOG}/cursors/{CURSOR}"), 201)
            values = {
                "ledger_id": str(ledger_id),
                "entry_id": "1",
                "name": LOG,
                "bookie_id": bookie.address,
                "gateway_id": gateway.proc.address,
                "commit_id": "no-such-commit",
                "cursor": CURSOR,
            }
            yield Env(gateway, bookie, ledger_id, values)
        finally:
            gateway.close_client()


def served(port: int) -> dict[str, Any]:
    r = poll_client().get(f"http://127.0.0.1:{port}/openapi.json", timeout=10.0)
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()
    return doc


def concrete(env: Env, path: str) -> str:
    path = path.replace("/admin/assets/{name}", "/admin/assets/admin.js")
    for name, value in env.values.items():
        path = path.replace("{" + name + "}", value)
    assert "{" not in path, f"no value for a parameter of {path}"
    return path


def exchange(port: int, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    """One request on its own connection (closed by the server after the answer): the
    status, the headers and every byte that followed the head."""
    request = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10.0) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def _ports(env: Env) -> dict[str, int]:
    return {"gateway": env.gateway.proc.port, "bookie": env.bookie.port}


# ------------------------------------------------------------------ HEAD


@pytest.mark.parametrize("service", ["gateway", "bookie"])
def test_head_of_every_get_path_answers_like_get(env: Env, service: str) -> None:
    """HEAD of each GET path of the served document, and of /openapi.json: the GET's
    status, Content-Type and Content-Length, and no body at all."""
    port = _ports(env)[service]
    doc = served(port)
    paths = [p for p, item in doc["paths"].items() if "get" in item] + ["/openapi.json"]
    assert len(paths) >= 8
    for path in paths:
        url = concrete(env, path)
        get = exchange(port, "GET", url)
        head = exchange(port, "HEAD", url)
        assert head[0] == get[0], (path, get[0], head[0], get[2][:200])
        assert head[0] != 405, path
        assert head[2] == b"", (path, head[2][:200])
        assert head[1].get("content-type") == get[1].get("content-type"), path
        if path not in VOLATILE and "content-length" in get[1]:
            assert head[1]["content-length"] == get[1]["content-length"], path
        assert get[0] == 200 or (path, get[0]) == ("/v1/logs/{name}/commits/{commit_id}", 404)


# ------------------------------------------------------------------ 405 and Allow


@pytest.mark.parametrize("service", ["gateway", "bookie"])
def test_every_405_carries_allow(env: Env, service: str) -> None:
    """Each documented path asked with a method it does not document: 405
    method_not_allowed with Allow naming exactly the documented methods (HEAD wherever
    GET)."""
    port = _ports(env)[service]
    doc = served(port)
    checked = 0
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10.0) as client:
        for path, item in doc["paths"].items():
            allowed = {m.upper() for m in item if m in HTTP_METHODS}
            allowed |= {"HEAD"} if "GET" in allowed else set()
            for method in ("GET", "PUT", "POST", "DELETE", "PATCH"):
                if method in allowed:
                    continue
                r = client.request(method, concrete(env, path))
                assert_error(r, 405, "method_not_allowed")
                assert set(r.headers["allow"].split(", ")) == allowed, (method, path)
                checked += 1
    assert checked > 20


def test_head_of_a_post_only_path_is_405_with_allow(env: Env) -> None:
    """HEAD where there is no GET (a log's writer, a ledger's close) is 405, Allow: POST."""
    for path in (f"/v1/logs/{LOG}/writer", f"/v1/ledgers/{env.ledger_id}/close"):
        status, headers, body = exchange(env.gateway.proc.port, "HEAD", path)
        assert (status, headers["allow"], body) == (405, "POST", b""), path


def test_head_of_an_unknown_log_path_is_404_like_get(env: Env) -> None:
    """A path only the /v1/logs catch-all takes: HEAD is 404 as GET is, not 405."""
    port = env.gateway.proc.port
    get = exchange(port, "GET", f"/v1/logs/{LOG}/no/such/route")
    head = exchange(port, "HEAD", f"/v1/logs/{LOG}/no/such/route")
    assert (get[0], head[0], head[2]) == (404, 404, b"")
    assert json.loads(get[2])["error"] == "not_found"


# ------------------------------------------------------------------ documents


@pytest.mark.parametrize(
    ("service", "scheme"), [("gateway", "bearerToken"), ("bookie", "clusterSecret")]
)
def test_served_documents_are_valid_with_an_optional_credential(
    env: Env, service: str, scheme: str
) -> None:
    """The document each running service serves is valid OpenAPI 3.1, and without a
    token or secret configured its /v1 calls may go with or without one."""
    doc = served(_ports(env)[service])
    validate(doc)
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if path.startswith("/v1") and method in HTTP_METHODS:
                assert op["security"] == [{scheme: []}, {}], (method, path)
                names = {p["name"].lower() for p in op.get("parameters", [])}
                assert not names & {"authorization", "x-cluster-secret"}, (method, path)


# ------------------------------------------------------------------ integral numbers


def test_integral_numbers_are_integers_in_bodies(env: Env) -> None:
    """1.0 is the integer 1 in a JSON body (as JSON Schema says), on the gateway and on
    the bookie; 1.5 is 400 invalid_argument."""
    g = env.gateway
    r = g.request(
        "POST", "/v1/ledgers", json={"ensemble_size": 1.0, "write_quorum": 1.0, "ack_quorum": 1.0}
    )
    ledger = ok(r, 201)
    assert [ledger[k] for k in ("ensemble_size", "write_quorum", "ack_quorum")] == [1, 1, 1]
    assert all(type(ledger[k]) is int for k in ("ensemble_size", "write_quorum", "ack_quorum"))
    assert b'"ensemble_size":1,' in r.content
    assert_error(
        g.request("POST", "/v1/ledgers", json={"ensemble_size": 1.5}), 400, "invalid_argument"
    )
    log = ok(
        g.request(
            "PUT",
            "/v1/logs/fuzz-float",
            json={"ensemble_size": 1.0, "write_quorum": 1.0, "ack_quorum": 1.0},
        ),
        201,
    )
    assert log["name"] == "fuzz-float"
    bookie = httpx.Client(base_url=env.bookie.url, timeout=10.0)
    with bookie:
        lid = env.ledger_id
        ok(bookie.post(f"/v1/ledgers/{lid}/lac", json={"lac": 1.0}))
        stored = ok(bookie.post("/v1/stored", json={"ledger_ids": [float(lid)]}))
        assert stored["ledgers"][0]["ledger_id"] == lid
        assert stored["ledgers"][0]["last_entry_id"] == 1
        assert_error(
            bookie.post(f"/v1/ledgers/{lid}/lac", json={"lac": 1.5}), 400, "invalid_argument"
        )


# ------------------------------------------------------------------ from > to


def test_from_greater_than_to_is_documented_400(env: Env) -> None:
    """from > to on a range read is 400 invalid_argument (docs/api.md) on the gateway and the
    bookie, and both served documents list that 400 on the operation."""
    lid = env.ledger_id
    r = env.gateway.request("GET", f"/v1/ledgers/{lid}/entries", params={"from": 1, "to": 0})
    assert_error(r, 400, "invalid_argument")
    r = poll_client().get(f"{env.bookie.url}/v1/ledgers/{lid}/entries?from=1&to=0", timeout=10.0)
    assert_error(r, 400, "invalid_argument")
    for port in _ports(env).values():
        op = served(port)["paths"]["/v1/ledgers/{ledger_id}/entries"]["get"]
        assert "from > to" in op["responses"]["400"]["description"]
        error = op["responses"]["400"]["content"]["application/json"]["schema"]
        assert error == {"$ref": "#/components/schemas/Error"}
    # json.loads of a page: from == to is fine (one entry).
    page = json.loads(env.gateway.request("GET", f"/v1/ledgers/{lid}/entries?from=1&to=1").content)
    assert [e["entry_id"] for e in page["entries"]] == [1]
