"""Bad input on every Logs route of a real gateway (docs/api.md "Logs"): a
4xx with the docs/api.md code and a body of exactly ``{"error", "message"}``, never a 500,
and never a partial append (the log's records are checked after each refusal)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from services.limits import BATCH_ENTRIES_MAX, ENTRY_SIZE_MAX_BYTES
from tests.integration.gateway_support import (
    Gateway,
    assert_error,
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)

RAW = {"Content-Type": "application/octet-stream"}
NAME = "bad-input"  # a log this gateway writes: ledgers [closed, open]


@dataclass
class Env:
    gateway: Gateway
    closed: int  # the log's first ledger: CLOSED, entries 0..1
    open: int  # the log's last ledger: OPEN, entry 0
    other: int  # a ledger that is in no log


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    with module_cluster(zookeeper, tmp_path_factory.mktemp("logs-bad-input")) as cluster:
        start_bookies(cluster, 3)
        gw = start_gateway(cluster)
        wait_writable(gw, 3)
        assert gw.request("PUT", f"/v1/logs/{NAME}").status_code == 201
        assert gw.request("PUT", "/v1/logs/not-mine").status_code == 201
        closed = _ok(gw.request("POST", f"/v1/logs/{NAME}/writer"))["ledger_id"]
        _ok(_batch(gw, NAME, [b"a", b"b"]))
        opened = _ok(gw.request("POST", f"/v1/logs/{NAME}/roll"))["ledger_id"]
        _ok(_raw(gw, NAME, b"c"))
        other = gw.create()["ledger_id"]
        yield Env(gw, closed, opened, other)
        gw.close_client()


def _ok(r: Any) -> Any:
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()


def _raw(gw: Gateway, name: str, data: bytes, key: str | None = None) -> Any:
    headers = {**RAW, **({"Idempotency-Key": key} if key is not None else {})}
    return gw.request("POST", f"/v1/logs/{name}/records", content=data, headers=headers)


def _batch(gw: Gateway, name: str, payloads: list[bytes], key: str | None = None) -> Any:
    body = {"entries": [base64.b64encode(p).decode() for p in payloads]}
    headers = {"Idempotency-Key": key} if key is not None else {}
    return gw.request("POST", f"/v1/logs/{name}/records", json=body, headers=headers)


def records(gw: Gateway) -> list[bytes]:
    """Every record of the test log (the writer's gateway reads up to its own LAC)."""
    out: list[bytes] = []
    params: dict[str, Any] = {}
    for _ in range(100):
        page = _ok(gw.request("GET", f"/v1/logs/{NAME}/records", params=params))
        out += [base64.b64decode(r["data"]) for r in page["records"]]
        if page["caught_up"]:
            return out
        params = {"from": page["next"]}
    raise AssertionError("never caught up")


def _routes(name: str) -> list[tuple[str, str]]:
    return [
        ("PUT", f"/v1/logs/{name}"),
        ("GET", f"/v1/logs/{name}"),
        ("DELETE", f"/v1/logs/{name}"),
        ("POST", f"/v1/logs/{name}/writer"),
        ("POST", f"/v1/logs/{name}/records"),
        ("GET", f"/v1/logs/{name}/records"),
        ("POST", f"/v1/logs/{name}/roll"),
        ("POST", f"/v1/logs/{name}/truncate?before=0:0"),
    ]


# Each as it goes into the URL (percent-encoded where it must be).
BAD_NAMES = [
    "a" * 201,
    "a%20b",
    "a%2Fb",
    "a%2fb",
    "%C3%A9t%C3%A9",
    "a*b",
    "a:b",
    "a%00b",
    "a%25b",
    "a+b",
    "a@b",
]


@pytest.mark.parametrize(("method", "path"), [case for bad in BAD_NAMES for case in _routes(bad)])
def test_bad_names_are_400_on_every_route(env: Env, method: str, path: str) -> None:
    """A name that is not 1-200 characters of A-Za-z0-9._- (too long, a space, an
    encoded slash, non-ASCII, other punctuation) is 400 invalid_argument everywhere."""
    r = env.gateway.request(method, path, content=b"x", headers=RAW)
    assert_error(r, 400, "invalid_argument")


@pytest.mark.parametrize(("method", "path"), _routes(""))
def test_an_empty_name_is_400(env: Env, method: str, path: str) -> None:
    """/v1/logs/ (and /v1/logs//records…): an empty name is 400 like any bad name."""
    r = env.gateway.request(method, path, content=b"x", headers=RAW)
    assert_error(r, 400, "invalid_argument")


def test_a_name_of_200_characters_and_dots_are_names(env: Env) -> None:
    """200 characters is the longest name; "." and ".." are names too (sent encoded,
    as clients would otherwise resolve them as path segments)."""
    long = "b" * 200
    assert env.gateway.request("PUT", f"/v1/logs/{long}").status_code == 201
    assert _ok(env.gateway.request("GET", f"/v1/logs/{long}"))["name"] == long
    for encoded, name in (("%2E", "."), ("%2E%2E", "..")):
        r = env.gateway.request("PUT", f"/v1/logs/{encoded}")
        assert r.status_code == 201, r.text
        assert r.json()["name"] == name
    listed = _ok(env.gateway.request("GET", "/v1/logs"))["logs"]
    assert {".", "..", long} <= set(listed)


@pytest.mark.parametrize(
    ("method", "path"), [case for case in _routes("no-such-log") if case[0] != "PUT"]
)
def test_unknown_log_is_404_on_every_route(env: Env, method: str, path: str) -> None:
    """A log that does not exist: 404 log_not_found on every route but PUT."""
    r = env.gateway.request(method, path, content=b"x", headers=RAW)
    assert_error(r, 404, "log_not_found")


BAD_POSITIONS = ["1", "1:", ":1", "-1:0", "0:-1", "01:0", "0:01", "+1:0", "1:2:3", "a:b",
                 "1.0:0", "1%3A0%20", f"{2**63}:0", "", "%201:0"]  # fmt: skip


@pytest.mark.parametrize("bad", BAD_POSITIONS)
def test_bad_positions_are_400(env: Env, bad: str) -> None:
    """A position that is not LID:EID of canonical non-negative integers: 400, for a
    read's from and a truncation's before; the log is unchanged."""
    g = env.gateway
    assert_error(g.request("GET", f"/v1/logs/{NAME}/records?from={bad}"), 400, "invalid_argument")
    r = g.request("POST", f"/v1/logs/{NAME}/truncate?before={bad}")
    assert_error(r, 400, "invalid_argument")
    assert _ok(g.request("GET", f"/v1/logs/{NAME}"))["ledgers"] == [env.closed, env.open]


def test_positions_outside_the_log_are_400(env: Env) -> None:
    """A ledger that is not in the log, or an entry past the end of a closed ledger (by
    more than one: just past the end means "after it"), is outside the log: 400 for
    reads and truncations, and nothing is truncated."""
    g = env.gateway
    outside = [f"{env.other}:0", f"{env.closed}:3", f"{env.closed}:100", f"{2**63 - 1}:0"]
    for where in outside:
        r = g.request("GET", f"/v1/logs/{NAME}/records", params={"from": where})
        assert_error(r, 400, "invalid_argument")
        r = g.request("POST", f"/v1/logs/{NAME}/truncate", params={"before": where})
        assert_error(r, 400, "invalid_argument")
    assert _ok(g.request("GET", f"/v1/logs/{NAME}"))["ledgers"] == [env.closed, env.open]
    after = _ok(g.request("GET", f"/v1/logs/{NAME}/records", params={"from": f"{env.closed}:2"}))
    assert [base64.b64decode(r["data"]) for r in after["records"]] == [b"c"]


def test_missing_before_and_bad_limits_are_400(env: Env) -> None:
    """truncate needs before; limit and wait_ms are canonical non-negative integers
    (limit at least 1)."""
    g = env.gateway
    assert_error(g.request("POST", f"/v1/logs/{NAME}/truncate"), 400, "invalid_argument")
    for query in ("limit=0", "limit=-1", "limit=01", "limit=x", "wait_ms=-1", "wait_ms=1.5"):
        r = g.request("GET", f"/v1/logs/{NAME}/records?{query}")
        assert_error(r, 400, "invalid_argument")
    for query in ("limit=0", "limit=abc", "after=" + "a" * 201):
        assert_error(g.request("GET", f"/v1/logs?{query}"), 400, "invalid_argument")


def test_roll_on_a_gateway_that_is_not_the_writer_is_409(env: Env) -> None:
    """An existing log whose writer this gateway is not: a roll is 409 not_writer and
    changes nothing (an append would take the role: tests/integration/
    test_logs_any_gateway.py)."""
    g = env.gateway
    assert_error(g.request("POST", "/v1/logs/not-mine/roll"), 409, "not_writer")
    assert _ok(g.request("GET", "/v1/logs/not-mine"))["ledgers"] == []


@pytest.mark.parametrize("key", ["", "k" * 129, "clé", "tab\tkey", "new\x7fline"])
def test_bad_idempotency_keys_are_400(env: Env, key: str) -> None:
    """An Idempotency-Key that is not 1-128 printable ASCII characters: 400, nothing
    appended."""
    before = records(env.gateway)
    r = env.gateway.request(
        "POST",
        f"/v1/logs/{NAME}/records",
        content=b"k",
        headers=[
            ("Content-Type", "application/octet-stream"),
            ("Idempotency-Key", key.encode("utf-8")),
        ],  # fmt: skip
    )
    assert_error(r, 400, "invalid_argument")
    assert records(env.gateway) == before


def test_a_reused_key_with_another_body_is_409_and_appends_nothing(env: Env) -> None:
    """The same key with other records (raw or batch): 409 idempotency_key_reused; the
    same key with the same records still answers the original position."""
    g = env.gateway
    first = _ok(_raw(g, NAME, b"keyed", key="reuse-me"))
    before = records(g)
    assert_error(_raw(g, NAME, b"other", key="reuse-me"), 409, "idempotency_key_reused")
    other = _batch(g, NAME, [b"keyed", b"more"], key="reuse-me")
    assert_error(other, 409, "idempotency_key_reused")
    assert records(g) == before
    assert _ok(_raw(g, NAME, b"keyed", key="reuse-me")) == first
    assert records(g) == before


def test_bodies_that_are_refused_append_nothing(env: Env) -> None:
    """Empty batch, not a batch, bad base64, non-JSON under a JSON content type: 400;
    a record of 5 MiB + 1 (raw or in a batch) and a batch over 10,000: 413 — and the
    log's records are unchanged after each. A record of exactly 5 MiB is accepted."""
    g = env.gateway
    url = f"/v1/logs/{NAME}/records"
    before = records(g)
    json_type = {"Content-Type": "application/json"}
    for body, status, code in (
        (b'{"entries": []}', 400, "invalid_argument"),
        (b'{"entries": "abc"}', 400, "invalid_argument"),
        (b"[]", 400, "invalid_argument"),
        (b'{"entries": ["not base64!"]}', 400, "invalid_argument"),
        (b"not json", 400, "invalid_argument"),
        (b"", 400, "invalid_argument"),
        (b'{"entries": ["YQ=="]', 400, "invalid_argument"),
    ):
        assert_error(g.request("POST", url, content=body, headers=json_type), status, code)
    too_big = b"x" * (ENTRY_SIZE_MAX_BYTES + 1)
    assert_error(_raw(g, NAME, too_big), 413, "payload_too_large")
    assert_error(_batch(g, NAME, [b"ok", too_big]), 413, "payload_too_large")
    assert_error(_batch(g, NAME, [b"."] * (BATCH_ENTRIES_MAX + 1)), 413, "payload_too_large")
    assert records(g) == before
    exact = b"y" * ENTRY_SIZE_MAX_BYTES
    position = _ok(_raw(g, NAME, exact))["position"]
    assert position["ledger_id"] == env.open
    assert records(g) == [*before, exact]


def test_unknown_routes_and_methods_under_logs_keep_404_and_405(env: Env) -> None:
    """The catch-all for bad names leaves the rest alone: an unknown route under a
    valid name is 404 not_found, a known route with another method 405."""
    g = env.gateway
    assert_error(g.request("GET", f"/v1/logs/{NAME}/nothing"), 404, "not_found")
    assert_error(g.request("POST", f"/v1/logs/{NAME}/records/0"), 404, "not_found")
    assert_error(g.request("PATCH", f"/v1/logs/{NAME}/records"), 405, "method_not_allowed")
    assert_error(g.request("DELETE", f"/v1/logs/{NAME}/records"), 405, "method_not_allowed")
    assert_error(g.request("GET", f"/v1/logs/{NAME}/roll"), 405, "method_not_allowed")
