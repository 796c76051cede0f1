"""The gateway's token rules (gateway/http/auth.py), ledger password hashes
(gateway/passwords.py), batch decoding (gateway/ledgers/routes.py) and the handle
table's lookups, without processes."""

from __future__ import annotations

import asyncio
import base64

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from gateway.http.auth import TokenMiddleware, TokenPolicy
from gateway.http.batches import decode_batch
from gateway.passwords import check_password, hash_password, password_matches
from services.errors import InvalidArgument, PayloadTooLarge, Unauthorized
from services.ledger_client.handles import HandleTable
from services.ledger_client.senders import SenderLimits, SenderTable
from services.limits import BATCH_ENTRIES_MAX, ENTRY_SIZE_MAX_BYTES
from services.protocol.metadata import LedgerMetadata
from services.web.errors import install_error_handlers
from tests.unit.ledger_client.fakes import FakeBookies, make_context

API, ADMIN = b"api", b"admin"


@pytest.mark.parametrize(
    ("api", "admin", "path", "token", "allowed"),
    [
        (None, None, "/v1/ledgers", None, True),
        (None, None, "/v1/admin/cluster", None, True),
        (API, None, "/v1/ledgers", None, False),
        (API, None, "/v1/ledgers", API, True),
        (API, None, "/v1/ledgers", b"apix", False),
        (API, None, "/v1/admin/cluster", API, True),  # no admin token: the API token will do
        (API, ADMIN, "/v1/ledgers", ADMIN, True),  # admin token accepted everywhere
        (API, ADMIN, "/v1/admin/cluster", API, False),  # ... but not the reverse
        (API, ADMIN, "/v1/admin/cluster", ADMIN, True),
        (API, ADMIN, "/v1/admin", API, False),
        (None, ADMIN, "/v1/ledgers", None, True),
        (None, ADMIN, "/v1/admin/bookies", None, False),
        (API, ADMIN, "/v1/administrator", ADMIN, True),
        (API, ADMIN, "/v1/administrator", API, True),  # not under /v1/admin/
    ],
)
def test_token_rules(
    api: bytes | None, admin: bytes | None, path: str, token: bytes | None, allowed: bool
) -> None:
    """docs/api.md: --api-token guards /v1/; --admin-token guards /v1/admin/ (the API token
    is not enough there) and is accepted wherever the API token is."""
    policy = TokenPolicy(api.decode() if api else None, admin.decode() if admin else None)
    assert (policy.check("GET", path, b"", token) is None) is allowed
    headers = [] if token is None else [(b"authorization", b"Bearer " + token)]
    scope = {"method": "GET", "path": path, "query_string": b"", "headers": headers}
    assert policy.allows(scope) is allowed


def _app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/v1/ledgers")
    async def ledgers() -> dict:
        return {"ok": True}

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok"}

    app.add_middleware(TokenMiddleware, policy=TokenPolicy("api", None))
    return app


def test_token_is_checked_before_routing() -> None:
    """Unknown /v1 routes and wrong methods are 401 without the token (then 404/405 with
    it); routes outside /v1 are public; the 401 body is {"error", "message"}."""
    client = TestClient(_app())
    for method, path in (("GET", "/v1/ledgers"), ("GET", "/v1/nope"), ("PUT", "/v1/ledgers"),
                         ("GET", "/v1")):  # fmt: skip
        r = client.request(method, path)
        assert r.status_code == 401
        assert r.json() == {"error": "unauthorized", "message": "missing or wrong bearer token"}
    auth = {"Authorization": "Bearer api"}
    assert client.get("/v1/ledgers", headers=auth).status_code == 200
    assert client.get("/v1/ledgers", headers={"Authorization": "bearer api"}).status_code == 200
    assert client.get("/v1/nope", headers=auth).json()["error"] == "not_found"
    assert client.put("/v1/ledgers", headers=auth).json()["error"] == "method_not_allowed"
    assert client.get("/health").status_code == 200
    assert client.get("/nope").json()["error"] == "not_found"


def test_password_hashes_are_salted_and_checked() -> None:
    """A hash never contains the password, two hashes of one password differ (salt), and
    only the right password matches; no password set means no check."""
    first, second = hash_password("s3cret"), hash_password("s3cret")
    assert first != second and "s3cret" not in first
    assert password_matches("s3cret", first) and password_matches("s3cret", second)
    assert not password_matches("S3cret", first)
    assert not password_matches(None, first)
    assert not password_matches("", first)
    assert not password_matches("s3cret", "garbage")

    async def checks() -> None:
        await check_password(None, None)
        await check_password("anything", None)
        await check_password("s3cret", first)
        with pytest.raises(Unauthorized):
            await check_password("wrong", first)
        with pytest.raises(Unauthorized):
            await check_password(None, first)

    asyncio.run(checks())


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_decode_batch() -> None:
    """{"entries": [base64...]} -> payloads in order; 400 for a missing or empty list,
    non-strings and bad base64; 413 over 10,000 entries or 5 MiB per entry."""
    assert decode_batch({"entries": [_b64(b"a"), _b64(b""), _b64(b"c")]}) == (b"a", b"", b"c")
    exact = b"x" * ENTRY_SIZE_MAX_BYTES
    assert decode_batch({"entries": [_b64(exact)]}) == (exact,)
    for doc in (None, [], {}, {"entries": None}, {"entries": "AAAA"}, {"entries": []},
                {"entries": [1]}, {"entries": ["@@"]}, {"entries": ["AAA"]},
                {"entries": ["AA AA"]}):  # fmt: skip
        with pytest.raises(InvalidArgument):
            decode_batch(doc)
    with pytest.raises(PayloadTooLarge):
        decode_batch({"entries": [""] * (BATCH_ENTRIES_MAX + 1)})
    with pytest.raises(PayloadTooLarge):
        decode_batch({"entries": [_b64(exact + b"!")]})


def test_handle_table_lookups_survive_an_empty_table() -> None:
    """A handle leaves the live table as soon as it stops being live (the live table is
    not bounded otherwise), and the table still finds that handle."""

    async def run() -> None:
        ctx = make_context(FakeBookies(["a:1", "b:2", "c:3"]))
        senders = SenderTable(ctx.bookie, SenderLimits.from_settings(ctx.settings))
        table = HandleTable(ctx, senders)
        metadata = LedgerMetadata.new(7, ["a:1", "b:2", "c:3"], 2, 2)
        runner = table.open(metadata, 0, b"")
        assert table.get(7) is runner and table.live_count == 1 and runner.idle
        runner.handle._state = type(runner.handle.state).FENCED  # as after a recovery
        runner._after_feed()  # the event that fenced it: retired at once, not on a lookup
        assert table.live_count == 0
        assert table.get(7) is runner  # retired, still found
        assert table.live(7) is None and table.writer_lac(7) is None
        assert ctx.metrics.open_handles._value.get() == 0
        await table.aclose()

    asyncio.run(run())
