"""Auth on a real cluster: the API and admin tokens (checked before routing), ledger
passwords (401 and nothing changes; never shown, never logged), and the cluster secret
between the gateway and secret-protected bookies."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from services.cluster.processes import poll_client
from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import (
    Gateway,
    assert_error,
    log_text,
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)

API_TOKEN = "api-token-3f9a1c"
ADMIN_TOKEN = "admin-token-77d2e0"
SECRET = "cluster-secret-0b5e44"
PASSWORD = "ledger-password-c81f"
WRONG = "not-the-password"
GUESSER_ADDRESS = "127.0.0.3"


@dataclass
class Env:
    cluster: Cluster
    writer: Gateway  # API token
    admin: Gateway  # same process, admin token
    anonymous: Gateway  # same process, no token
    other: Gateway  # a second gateway, API token
    bookies: list
    # The writer's and the other gateway's processes seen from another client address:
    # wrong passwords go through these, so the per-address budget they use up is never
    # the one the tests' right-password calls need (it refills at 2/s, so sharing it
    # would make a test's outcome depend on how fast the ones before it ran).
    guessers: tuple[Gateway, Gateway]


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("gateway-auth")
    with module_cluster(zookeeper, base, secret=SECRET) as cluster:
        bookies = start_bookies(cluster, 3)
        args = ["--api-token", API_TOKEN, "--admin-token", ADMIN_TOKEN, "--log-level", "debug"]
        writer = start_gateway(cluster, args, token=API_TOKEN)
        other = start_gateway(cluster, args, token=API_TOKEN)
        wait_writable(writer, 3)
        yield Env(
            cluster,
            writer,
            Gateway(writer.proc, token=ADMIN_TOKEN),
            Gateway(writer.proc),
            other,
            bookies,
            (
                Gateway(writer.proc, token=API_TOKEN, local_address=GUESSER_ADDRESS),
                Gateway(other.proc, token=API_TOKEN, local_address=GUESSER_ADDRESS),
            ),
        )


def _v1_calls(lid: int) -> list[tuple[str, str]]:
    return [
        ("POST", "/v1/ledgers"),
        ("GET", "/v1/ledgers"),
        ("GET", f"/v1/ledgers/{lid}"),
        ("DELETE", f"/v1/ledgers/{lid}"),
        ("POST", f"/v1/ledgers/{lid}/entries"),
        ("GET", f"/v1/ledgers/{lid}/entries"),
        ("GET", f"/v1/ledgers/{lid}/entries/0"),
        ("GET", f"/v1/ledgers/{lid}/lac"),
        ("POST", f"/v1/ledgers/{lid}/close"),
        ("POST", f"/v1/ledgers/{lid}/recover"),
        # unknown /v1 routes and wrong methods: 401 before 404/405
        ("GET", "/v1"),
        ("GET", "/v1/nope"),
        ("PUT", "/v1/ledgers"),
        ("GET", "/v1/admin/cluster"),
        ("GET", f"/v1/ledgers/{lid}/nope"),
    ]


def test_api_token_is_required_on_every_v1_call(env: Env) -> None:
    """With --api-token, every /v1 call without it or with a wrong one (also a wrong
    scheme) is 401 unauthorized, unknown /v1 routes included, and changes nothing."""
    lid = env.writer.create()["ledger_id"]
    env.writer.add(lid, b"zero")
    url = env.writer.url
    headers_cases = [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Bearer {API_TOKEN}x"},
        {"Authorization": f"Basic {API_TOKEN}"},
        {"Authorization": API_TOKEN},
        {"X-Api-Token": API_TOKEN},
    ]
    with httpx.Client(base_url=url, timeout=10) as http:
        for headers in headers_cases:
            for method, path in _v1_calls(lid):
                r = http.request(method, path, headers=headers, content=b"data")
                assert_error(r, 401, "unauthorized")
    assert env.writer.lac(lid) == 0
    assert env.writer.metadata(lid)["state"] == "OPEN"
    assert env.writer.request("GET", "/v1/ledgers").json()["ledgers"].count(lid) == 1


def test_public_routes_need_no_token(env: Env) -> None:
    """/health, /metrics, /openapi.json and the /docs page are public."""
    g = env.anonymous
    assert g.request("GET", "/health").status_code == 200
    assert g.request("GET", "/metrics").status_code == 200
    doc = g.request("GET", "/openapi.json")
    assert doc.status_code == 200 and "/v1/ledgers" in doc.json()["paths"]
    docs = g.request("GET", "/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_admin_token_is_accepted_where_the_api_token_is(env: Env) -> None:
    """The admin token works on every ledger call the API token works on."""
    a = env.admin
    lid = a.create()["ledger_id"]
    assert a.add(lid, b"by admin")["entry_id"] == 0
    assert a.add_batch(lid, [b"one", b"two"])["last_entry_id"] == 2
    assert a.lac(lid) == 2
    assert a.entry(lid, 0) == b"by admin"
    assert [d for _, d in a.read_all(lid)] == [b"by admin", b"one", b"two"]
    assert a.close(lid)["last_entry_id"] == 2
    assert a.recover(lid)["state"] == "CLOSED"
    assert lid in a.request("GET", "/v1/ledgers").json()["ledgers"]
    assert a.request("DELETE", f"/v1/ledgers/{lid}").status_code == 204


def _password_calls(lid: int) -> list[tuple[str, str, dict]]:
    return [
        ("POST", f"/v1/ledgers/{lid}/entries", {"content": b"raw"}),
        ("POST", f"/v1/ledgers/{lid}/entries", {"json": {"entries": ["AAAA"]}}),
        ("GET", f"/v1/ledgers/{lid}/entries", {}),
        ("GET", f"/v1/ledgers/{lid}/entries", {"headers": {"Accept": "application/x-ndjson"}}),
        ("GET", f"/v1/ledgers/{lid}/entries/0", {}),
        ("GET", f"/v1/ledgers/{lid}/lac", {}),
        ("GET", f"/v1/ledgers/{lid}/lac", {"params": {"after": 0, "wait_ms": 50}}),
        ("POST", f"/v1/ledgers/{lid}/close", {}),
        ("POST", f"/v1/ledgers/{lid}/recover", {}),
        ("DELETE", f"/v1/ledgers/{lid}", {}),
    ]


@pytest.mark.parametrize("digest", ["crc32c", "hmac-sha256"])
def test_ledger_password_is_required_and_a_refusal_changes_nothing(env: Env, digest: str) -> None:
    """A ledger created with a password: a missing or wrong X-Ledger-Password is 401 on
    add, read, LAC, close, recover and delete, on the writer and on another gateway,
    and nothing changes (LAC, state, entries, existence)."""
    w, o = env.writer, env.other
    lid = w.create(password=PASSWORD, digest=digest)["ledger_id"]
    w.add_batch(lid, [b"a", b"b"], password=PASSWORD)
    for gateway in env.guessers:
        for password in (None, WRONG, PASSWORD.upper(), ""):
            headers = {} if password is None else {"X-Ledger-Password": password}
            for method, path, kw in _password_calls(lid):
                kw = dict(kw)
                kw["headers"] = {**kw.get("headers", {}), **headers}
                r = gateway.request(method, path, **kw)
                assert_error(r, 401, "unauthorized")
    meta = w.metadata(lid)
    assert meta["state"] == "OPEN"
    assert w.lac(lid, password=PASSWORD) == 1
    assert [d for _, d in w.read_all(lid, password=PASSWORD)] == [b"a", b"b"]
    wait_for(lambda: o.lac(lid, password=PASSWORD) == 1, 10, "the other gateway to see LAC 1")
    assert [d for _, d in o.read_all(lid, password=PASSWORD)] == [b"a", b"b"]
    # The right password: everything works, on both gateways.
    assert w.add(lid, b"c", password=PASSWORD)["entry_id"] == 2
    assert o.entry(lid, 1, password=PASSWORD) == b"b"
    closed = w.close(lid, password=PASSWORD)
    assert closed["last_entry_id"] == 2
    assert o.recover(lid, password=PASSWORD) == closed
    assert [d for _, d in o.read_ndjson(lid, password=PASSWORD)] == [b"a", b"b", b"c"]
    r = o.request("DELETE", f"/v1/ledgers/{lid}", headers={"X-Ledger-Password": PASSWORD})
    assert r.status_code == 204


def test_wrong_password_recovery_leaves_the_writer_writing(env: Env) -> None:
    """A recover refused for its password fences nothing: the ledger stays OPEN and its
    writer keeps appending."""
    lid = env.writer.create(password=PASSWORD)["ledger_id"]
    env.writer.add(lid, b"first", password=PASSWORD)
    r = env.guessers[1].request(
        "POST", f"/v1/ledgers/{lid}/recover", headers={"X-Ledger-Password": WRONG}
    )
    assert_error(r, 401, "unauthorized")
    assert env.other.metadata(lid)["state"] == "OPEN"
    assert env.writer.add(lid, b"second", password=PASSWORD)["entry_id"] == 1


def test_metadata_never_checks_or_shows_the_password(env: Env) -> None:
    """GET /v1/ledgers/{id} answers without a password (and with a wrong one) and never
    shows the password or its hash; neither does create, close or the list."""
    created = env.writer.create(password=PASSWORD, metadata={"owner": "tests"})
    lid = created["ledger_id"]
    texts = [env.writer.request("POST", "/v1/ledgers", json={"password": PASSWORD}).text]
    for gateway in (env.writer, env.other):
        for headers in ({}, {"X-Ledger-Password": WRONG}):
            r = gateway.request("GET", f"/v1/ledgers/{lid}", headers=headers)
            assert r.status_code == 200, r.text
            assert r.json()["metadata"] == {"owner": "tests"}
            texts.append(r.text)
    texts.append(env.writer.close(lid, password=PASSWORD).__repr__())
    texts.append(env.writer.request("GET", "/v1/ledgers").text)
    expected = {
        "ledger_id", "state", "ensemble_size", "write_quorum", "ack_quorum", "digest",
        "last_entry_id", "length", "fragments", "metadata", "created_at", "closed_at",
    }  # fmt: skip
    assert set(created) == expected
    for text in texts:
        assert PASSWORD not in text
        assert "pbkdf2" not in text and "password" not in text


def test_hmac_ledger_round_trips_with_its_password(env: Env) -> None:
    """An hmac-sha256 ledger with a password: adds and reads (pages, NDJSON, single,
    from another gateway, after recovery) return the exact bytes."""
    lid = env.writer.create(password=PASSWORD, digest="hmac-sha256")["ledger_id"]
    payloads = [bytes([n]) * (n * 100 + 1) for n in range(8)]
    env.writer.add(lid, payloads[0], password=PASSWORD)
    env.writer.add_batch(lid, payloads[1:], password=PASSWORD)
    assert [d for _, d in env.writer.read_all(lid, password=PASSWORD)] == payloads
    # Another gateway learns the LAC from the bookies: after the writer's idle LAC update.
    wait_for(lambda: env.other.lac(lid, password=PASSWORD) == 7, 10, "the LAC update")
    assert env.other.entry(lid, 7, password=PASSWORD) == payloads[7]
    closed = env.other.recover(lid, password=PASSWORD)
    assert closed["digest"] == "hmac-sha256"
    assert closed["last_entry_id"] == 7
    assert closed["length"] == sum(map(len, payloads))
    assert [d for _, d in env.other.read_ndjson(lid, password=PASSWORD)] == payloads


def test_wrong_password_on_an_hmac_ledger_is_401_not_503(env: Env) -> None:
    """A reader with the wrong password on an hmac-sha256 ledger gets 401 unauthorized on
    a single-entry read, a range read (page and NDJSON) and a LAC read (plain and long
    poll), never a 503 "no replica" that looks like data loss: on the writer and on
    another gateway, while the ledger is OPEN and once it is CLOSED."""
    lid = env.writer.create(password=PASSWORD, digest="hmac-sha256")["ledger_id"]
    env.writer.add_batch(lid, [b"one", b"two", b"three"], password=PASSWORD)
    wait_for(lambda: env.other.lac(lid, password=PASSWORD) == 2, 10, "the LAC update")
    reads = [
        (f"/v1/ledgers/{lid}/entries/1", {}),
        (f"/v1/ledgers/{lid}/entries", {}),
        (f"/v1/ledgers/{lid}/entries", {"Accept": "application/x-ndjson"}),
        (f"/v1/ledgers/{lid}/lac", {}),
        (f"/v1/ledgers/{lid}/lac?after=0&wait_ms=50", {}),
    ]
    for state in ("OPEN", "CLOSED"):
        for gateway in env.guessers:
            for path, headers in reads:
                r = gateway.request("GET", path, headers={**headers, "X-Ledger-Password": WRONG})
                assert_error(r, 401, "unauthorized")
        assert env.other.metadata(lid)["state"] == state
        assert env.other.entry(lid, 1, password=PASSWORD) == b"two"
        if state == "OPEN":
            env.writer.close(lid, password=PASSWORD)


def test_cluster_secret_end_to_end(env: Env) -> None:
    """The bookies run with --cluster-secret and refuse data-path calls without it, while
    the gateway (given the same secret) creates, writes, reads and recovers through
    them."""
    bookie = env.bookies[0]
    r = poll_client().get(f"{bookie.url}/v1/ledgers")
    assert_error(r, 401, "unauthorized")
    r = poll_client().get(f"{bookie.url}/v1/ledgers", headers={"X-Cluster-Secret": "wrong"})
    assert_error(r, 401, "unauthorized")
    r = poll_client().get(f"{bookie.url}/v1/ledgers", headers={"X-Cluster-Secret": SECRET})
    assert r.status_code == 200, r.text
    lid = env.writer.create(ensemble_size=3, write_quorum=3, ack_quorum=3)["ledger_id"]
    env.writer.add_batch(lid, [b"s1", b"s2"])
    # The other gateway learns the LAC from the bookies (the writer's idle LAC update).
    wait_for(lambda: env.other.lac(lid) == 1, 10, "the other gateway to see LAC 1")
    assert [d for _, d in env.other.read_all(lid)] == [b"s1", b"s2"]
    assert env.other.recover(lid)["last_entry_id"] == 1
    stored = poll_client().get(
        f"{bookie.url}/v1/ledgers/{lid}/entries/1", headers={"X-Cluster-Secret": SECRET}
    )
    assert stored.status_code == 200 and b"s2" in stored.content


def test_secrets_never_reach_a_log(env: Env) -> None:
    """After every call above (gateways at debug level), no service log file holds the
    ledger password, a token or the cluster secret, nor the password in base64."""
    text = log_text(env.cluster)
    assert text, "no service logs were written"
    for secret in (PASSWORD, API_TOKEN, ADMIN_TOKEN, SECRET):
        assert secret not in text
        assert base64.b64encode(secret.encode()).decode()[:16] not in text
