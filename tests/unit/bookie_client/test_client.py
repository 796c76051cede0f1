"""The bookie client against fake bookies on loopback: a FastAPI app served by an
in-process uvicorn (the real bookie's server stack), and raw asyncio servers that
misbehave (never answer, drop connections, send garbage)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import uvicorn
from fastapi import FastAPI, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from services import errors
from services.bookie_client import (
    BookieAddResult,
    BookieClient,
    BookieClientPool,
    LacInfo,
    limits,
)
from services.bookie_client.transport import split_address
from services.cluster.processes import free_port
from services.errors import (
    BookieUnavailable,
    EntryNotFound,
    LedgerNotFound,
    PayloadTooLarge,
    QuireError,
    Unauthorized,
)
from services.limits import BATCH_ENTRIES_MAX
from services.web.errors import install_error_handlers
from services.wire import framing

SECRET = "s3cret-value-that-must-not-leak"


def run(coro: Awaitable[None]) -> None:
    asyncio.run(coro)  # type: ignore[arg-type]


# ------------------------------------------------------------------ a fake bookie


class FakeBookie:
    """The bookie API of docs/api.md "Bookie" over in-memory dicts, just enough for the client."""

    def __init__(self, secret: str | None = None) -> None:
        self.secret = secret
        self.entries: dict[int, dict[int, framing.FramedRecord]] = {}
        self.lac: dict[int, int] = {}
        self.fenced: set[int] = set()
        self.forced: tuple[int, bytes, str] | None = None  # status, body, media type
        self.requests = 0
        self.app = self._build()

    def _ledger(self, lid: int) -> dict[int, framing.FramedRecord]:
        if lid not in self.entries:
            raise LedgerNotFound(f"no ledger {lid}")
        return self.entries[lid]

    def _lac_doc(self, lid: int) -> dict:
        stored = self.entries.get(lid, {})
        return {
            "ledger_id": lid,
            "lac": self.lac.get(lid, -1),
            "last_entry_id": max(stored, default=-1),
            "fenced": lid in self.fenced,
        }

    def _build(self) -> FastAPI:
        app = FastAPI()
        install_error_handlers(app)

        @app.middleware("http")
        async def guard(request: Request, call_next):
            self.requests += 1
            if self.forced is not None:
                status, body, media = self.forced
                return Response(body, status_code=status, media_type=media)
            if self.secret and request.headers.get("x-cluster-secret") != self.secret:
                return JSONResponse(Unauthorized("bad secret").to_json(), status_code=401)
            return await call_next(request)

        @app.post("/v1/entries")
        async def add(request: Request):
            records = framing.decode(await request.body())
            if not records:
                raise errors.InvalidArgument("empty body")
            stored, rejected = 0, []
            for r in records:
                if r.ledger_id in self.fenced and not r.recovery:
                    rejected.append(
                        {"ledger_id": r.ledger_id, "entry_id": r.entry_id, "error": "ledger_fenced"}
                    )
                    continue
                self.entries.setdefault(r.ledger_id, {})[r.entry_id] = r
                self.lac[r.ledger_id] = max(self.lac.get(r.ledger_id, -1), r.lac)
                stored += 1
            return {"stored": stored, "rejected": rejected}

        @app.get("/v1/ledgers/{lid}/entries/{eid}")
        async def read_entry(lid: int, eid: int):
            ledger = self._ledger(lid)
            if eid not in ledger:
                raise EntryNotFound(f"no entry {lid}/{eid}")
            return Response(framing.encode([ledger[eid]]), media_type=framing.MEDIA_TYPE)

        @app.get("/v1/ledgers/{lid}/entries")
        async def read_range(
            lid: int,
            from_: int = Query(0, alias="from"),
            to: int = 0,
            max_entries: int = 1000,
            max_bytes: int = 1,
        ):
            ledger = self._ledger(lid)
            out = [ledger[e] for e in sorted(ledger) if from_ <= e <= to][:max_entries]
            headers = {"X-Quire-Last-Entry-Id": str(max(ledger, default=-1))}
            if lid == 99:  # exercise chunked transfer encoding
                body = framing.encode(out)
                chunks = [body[i : i + 7] for i in range(0, len(body), 7)]

                async def gen():
                    for c in chunks:
                        yield c

                return StreamingResponse(gen(), media_type=framing.MEDIA_TYPE, headers=headers)
            return Response(framing.encode(out), media_type=framing.MEDIA_TYPE, headers=headers)

        @app.get("/v1/ledgers/{lid}/lac")
        async def read_lac(lid: int, after: int | None = None, wait_ms: int = 0):
            self._ledger(lid)
            if after is not None:
                end = time.monotonic() + wait_ms / 1000
                while time.monotonic() < end and self._lac_doc(lid)["lac"] <= after:
                    await asyncio.sleep(0.01)
            return self._lac_doc(lid)

        @app.post("/v1/ledgers/{lid}/lac")
        async def write_lac(lid: int, request: Request):
            lac = int((await request.json())["lac"])
            self.entries.setdefault(lid, {})
            self.lac[lid] = max(self.lac.get(lid, -1), lac)
            return self._lac_doc(lid)

        @app.post("/v1/ledgers/{lid}/fence")
        async def fence(lid: int):
            self.entries.setdefault(lid, {})
            self.fenced.add(lid)
            return self._lac_doc(lid)

        @app.delete("/v1/ledgers/{lid}", status_code=204)
        async def delete(lid: int):
            self._ledger(lid)
            del self.entries[lid]
            self.fenced.discard(lid)
            return Response(status_code=204)

        @app.get("/v1/ledgers")
        async def list_ledgers(after: int = -1, limit: int = 1000):
            ids = sorted(i for i in self.entries if i > after)
            page = ids[:limit]
            return {"ledgers": page, "next": page[-1] if len(ids) > limit else None}

        @app.get("/v1/info")
        async def info():
            return {"bookie_id": "fake", "state": "writable", "journal_sync": True}

        return app


@contextlib.asynccontextmanager
async def served(app: FastAPI) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn+httptools on a free loopback port; yields host:port."""
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="error", http="httptools", lifespan="off"
    )
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[tuple[str, list]]:
    """A TCP server running ``handler`` per connection; yields host:port and the
    list of accepted connections (for counting)."""
    accepted: list = []

    async def on_connect(reader, writer):
        accepted.append(writer)
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}", accepted
    finally:
        server.close()
        for w in accepted:
            w.transport.abort()
        await server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    if length:
        await reader.readexactly(length)
    return head


def json_answer(doc: dict, status: int = 200, extra: str = "") -> bytes:
    body = json.dumps(doc).encode()
    return (
        f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n{extra}\r\n"
    ).encode() + body


def record(lid: int, eid: int, payload: bytes = b"x", **kw) -> framing.FramedRecord:
    return framing.FramedRecord(lid, eid, eid - 1, payload, **kw)


# ------------------------------------------------------------------ success paths


def test_every_call_round_trips_against_a_fake_bookie():
    """Each API call sends what docs/api.md "Bookie" says and parses the answer into its result."""

    async def main():
        fake = FakeBookie(secret=SECRET)
        async with served(fake.app) as addr, BookieClient(f"http://{addr}/", SECRET) as client:
            payloads = [bytes([i]) * (i * 100) for i in range(5)]
            recs = [record(7, i, p, length=i) for i, p in enumerate(payloads)]
            assert await client.add(recs) == BookieAddResult(5, [])
            assert await client.add([]) == BookieAddResult(0, [])

            got = await client.read_entry(7, 3)
            assert got == recs[3]

            rng = await client.read_range(7, 1, 3)
            assert [r.entry_id for r in rng.records] == [1, 2, 3]
            assert [r.payload for r in rng.records] == payloads[1:4]
            assert rng.last_entry_id == 4
            assert (await client.read_range(7, 0, 10, max_entries=2)).records == recs[:2]

            assert await client.read_lac(7) == LacInfo(7, 3, 4, False)
            assert await client.write_lac(7, 4) == LacInfo(7, 4, 4, False)
            assert await client.fence(7) == LacInfo(7, 4, 4, True)

            result = await client.add([record(7, 5), record(7, 6, recovery=True), record(8, 0)])
            assert result == BookieAddResult(2, [(7, 5, "ledger_fenced")])

            ids, nxt = await client.list_ledgers()
            assert (ids, nxt) == ([7, 8], None)
            assert await client.list_ledgers(limit=1) == ([7], 7)
            assert await client.list_ledgers(after=7, limit=1) == ([8], None)

            assert (await client.info())["bookie_id"] == "fake"
            await client.delete_ledger(8)
            assert await client.list_ledgers() == ([7], None)

    run(main())


def test_chunked_answers_are_read_whole():
    """A chunked (streamed) answer is reassembled; the connection stays usable."""

    async def main():
        fake = FakeBookie()
        async with served(fake.app) as addr, BookieClient(addr, None) as client:
            recs = [record(99, i, b"p" * i) for i in range(20)]
            await client.add(recs)
            got = await client.read_range(99, 0, 19)
            assert got.records == recs and got.last_entry_id == 19
            assert (await client.read_entry(99, 5)).payload == b"ppppp"

    run(main())


def test_long_poll_lac_waits_and_returns_early():
    """A long-poll LAC read returns as soon as the LAC passes ``after``, on its own
    connections, while ordinary calls go on."""

    async def main():
        fake = FakeBookie()
        async with served(fake.app) as addr, BookieClient(addr, connections_max=1) as client:
            await client.add([record(1, 0)])
            started = time.monotonic()
            poll = asyncio.create_task(client.read_lac(1, after=0, wait_ms=5000))
            await asyncio.sleep(0.1)
            assert not poll.done()
            assert (await client.read_lac(1)).lac == -1  # not blocked behind the poll
            await client.write_lac(1, 3)
            info = await poll
            assert info.lac == 3
            assert time.monotonic() - started < 2.0
            # A poll that times out on the bookie side answers with what it has.
            assert (await client.read_lac(1, after=10, wait_ms=100)).lac == 3

    run(main())


def test_pool_hands_out_one_client_per_bookie_and_closes_them():
    """The pool builds one client per bookie id and reuses it; aclose closes all."""

    async def main():
        fake = FakeBookie()
        async with served(fake.app) as addr:
            pool = BookieClientPool(None, request_timeout_s=5)
            client = pool.get(addr)
            assert pool.get(addr) is client and pool[addr] is client and addr in pool
            assert (await client.info())["state"] == "writable"
            other = pool.get("other-id", address=f"http://{addr}")
            assert other is not client and other.address == addr
            await pool.aclose()
            with pytest.raises(BookieUnavailable):
                pool.get("new:1")

    run(main())


def test_keep_alive_connections_are_reused_and_bounded():
    """Sequential calls share one connection; concurrent calls never open more than
    ``connections_max`` connections."""

    async def main():
        async def handler(reader, writer):
            while True:
                await read_request(reader)
                await asyncio.sleep(0.01)
                writer.write(json_answer({"bookie_id": "x"}))
                await writer.drain()

        async with raw_server(handler) as (addr, accepted):
            async with BookieClient(addr, connections_max=3) as client:
                for _ in range(5):
                    await client.info()
                assert len(accepted) == 1
                await asyncio.gather(*(client.info() for _ in range(30)))
                assert len(accepted) == 3

    run(main())


def test_split_address():
    """Addresses are host:port, with or without http:// or https:// (a TLS bookie
    registers the latter) and a trailing slash."""
    assert split_address("10.0.0.1:3181") == ("10.0.0.1", 3181)
    assert split_address("http://b1:80/") == ("b1", 80)
    assert split_address("https://b1:443") == ("b1", 443)
    assert split_address("http://[::1]:3181") == ("::1", 3181)
    for bad in ("b1", "http://b1", "https://b1", "b1:x", "b1:70000"):
        with pytest.raises(ValueError):
            split_address(bad)


# ------------------------------------------------------------------ error mapping

# Every error class by its code (services.errors registers them all when it is imported).
ALL_ERRORS = sorted(errors.ERRORS_BY_CODE.values(), key=lambda c: c.code)


@pytest.mark.parametrize("cls", ALL_ERRORS, ids=lambda c: c.code)
def test_every_error_code_maps_back_to_its_class(cls: type[QuireError]):
    """A bookie's {"error": code} answer raises the class of that code (5xx ``internal``
    and unknown codes raise BookieUnavailable: the bookie failed)."""

    async def main():
        fake = FakeBookie()
        body = json.dumps({"error": cls.code, "message": "told you"}).encode()
        fake.forced = (cls.http_status, body, "application/json")
        async with served(fake.app) as addr, BookieClient(addr, SECRET) as client:
            with pytest.raises(QuireError) as info:
                await client.fence(1)
            expected = BookieUnavailable if cls is QuireError else cls
            assert type(info.value) is expected
            assert "told you" in info.value.message and addr in info.value.message
            assert SECRET not in info.value.message

    run(main())


@pytest.mark.parametrize(
    ("status", "body", "media", "expected"),
    [
        (500, b"Internal Server Error", "text/plain", BookieUnavailable),
        (502, b"<html>bad gateway</html>", "text/html", BookieUnavailable),
        (503, b"", "text/plain", BookieUnavailable),
        (500, b'{"error": "no_such_code"}', "application/json", BookieUnavailable),
        (404, b"not here", "text/plain", errors.NotFound),
        (401, b"", "text/plain", Unauthorized),
        (418, b"teapot", "text/plain", QuireError),
        (200, b"not json", "application/json", BookieUnavailable),
        (200, b'{"stored": "many"}', "application/json", BookieUnavailable),
        (200, b"[1, 2]", "application/json", BookieUnavailable),
    ],
)
def test_answers_without_a_usable_body(status, body, media, expected):
    """Non-JSON 5xx and malformed 200 answers are BookieUnavailable; a bare 4xx maps by
    status."""

    async def main():
        fake = FakeBookie()
        fake.forced = (status, body, media)
        async with served(fake.app) as addr, BookieClient(addr) as client:
            with pytest.raises(QuireError) as info:
                await client.add([record(1, 0)])
            assert type(info.value) is expected

    run(main())


def test_malformed_framing_and_wrong_entry_are_bookie_failures():
    """A read answer that does not parse, or holds another entry, is BookieUnavailable,
    never InvalidArgument (which would blame the caller)."""

    async def main():
        fake = FakeBookie()
        async with served(fake.app) as addr, BookieClient(addr) as client:
            fake.forced = (200, b"\x00\x01garbage", framing.MEDIA_TYPE)
            with pytest.raises(BookieUnavailable, match="malformed"):
                await client.read_entry(1, 0)
            fake.forced = (200, framing.encode([record(1, 1)]), framing.MEDIA_TYPE)
            with pytest.raises(BookieUnavailable, match="another entry"):
                await client.read_entry(1, 0)

    run(main())


def test_wrong_secret_is_unauthorized_and_not_echoed():
    """A wrong cluster secret gives Unauthorized; the secret is in no message or repr."""

    async def main():
        fake = FakeBookie(secret="right")
        async with served(fake.app) as addr, BookieClient(addr, SECRET) as client:
            with pytest.raises(Unauthorized) as info:
                await client.info()
            assert SECRET not in str(info.value) and SECRET not in repr(client)
        with pytest.raises(ValueError) as bad:
            BookieClient("h:1", "a\r\nX-Injected: 1")
        assert "X-Injected" not in str(bad.value)

    run(main())


def test_oversized_adds_are_refused_locally():
    """More records than a bookie takes are refused before anything is sent."""

    async def main():
        fake = FakeBookie()
        async with served(fake.app) as addr, BookieClient(addr) as client:
            recs = [record(1, i) for i in range(BATCH_ENTRIES_MAX + 1)]
            with pytest.raises(PayloadTooLarge):
                await client.add(recs)
            assert fake.requests == 0

    run(main())


# ------------------------------------------------------------------ transport failures


def test_connection_refused_is_bookie_unavailable_at_once():
    """Nothing listening: BookieUnavailable quickly, caused by the OSError."""

    async def main():
        client = BookieClient(f"127.0.0.1:{free_port()}", SECRET, request_timeout_s=5)
        started = time.monotonic()
        with pytest.raises(BookieUnavailable) as info:
            await client.info()
        # Not the request's 5 s time-out (a refusal waited out would fail here).
        assert time.monotonic() - started < 2.0
        assert isinstance(info.value.__cause__, OSError)
        assert SECRET not in str(info.value)
        await client.aclose()

    run(main())


def test_a_bookie_that_never_answers_times_out_within_the_bound():
    """A bookie that takes the request and never answers: BookieUnavailable after
    request_timeout_s, and the connection is dropped, not reused."""

    async def main():
        async def handler(reader, writer):
            await read_request(reader)
            await asyncio.sleep(60)

        async with raw_server(handler) as (addr, accepted):
            client = BookieClient(addr, request_timeout_s=0.3)
            for _ in range(2):
                started = time.monotonic()
                with pytest.raises(BookieUnavailable, match="no answer within") as info:
                    await client.fence(1)
                # Not before the 0.3 s time-out; bounded (the bookie would hold it 60 s).
                assert 0.25 < time.monotonic() - started < 2.0
                assert isinstance(info.value.__cause__, TimeoutError)
            # A timed-out connection is never reused, nor the request sent once more on
            # a new one (which would also double its time).
            assert len(accepted) == 2
            await client.aclose()

    run(main())


def test_waiting_for_a_connection_counts_against_the_timeout():
    """With every connection busy, a call waits at most request_timeout_s in total.
    Six calls on one connection: each waiting its own time-out after the one before it
    would take 3 s; together they end in about 0.5 s (the bound leaves room for a busy
    machine).

    The calls queue for the one connection rather than each opening its own: the bookie
    never holds two requests at once. (How many connections are opened in all is not
    fixed: the first call's deadline frees the connection microseconds before the next
    call's deadline, and on a busy machine that call may connect in between.)"""

    async def main():
        holding = [0]
        holding_max = [0]

        async def handler(reader, writer):
            await read_request(reader)
            holding[0] += 1
            holding_max[0] = max(holding_max[0], holding[0])
            try:
                await reader.read()  # until the client drops the connection
            finally:
                holding[0] -= 1

        async with raw_server(handler) as (addr, accepted):
            client = BookieClient(addr, request_timeout_s=0.5, connections_max=1)
            started = time.monotonic()
            results = await asyncio.gather(
                *(client.info() for _ in range(6)), return_exceptions=True
            )
            assert all(isinstance(r, BookieUnavailable) for r in results)
            assert time.monotonic() - started < 2.0
            assert holding_max[0] == 1
            assert 1 <= len(accepted) < 6
            await client.aclose()

    run(main())


def test_a_closed_keep_alive_connection_is_replaced_transparently():
    """The bookie closes each connection after answering (without saying so): the next
    call finds the idle connection dead and retries once on a new one."""

    async def main():
        async def handler(reader, writer):
            await read_request(reader)
            writer.write(json_answer({"bookie_id": "x"}))
            await writer.drain()
            writer.close()

        async with raw_server(handler) as (addr, accepted):
            async with BookieClient(addr) as client:
                for _ in range(4):
                    assert (await client.info())["bookie_id"] == "x"
                    await asyncio.sleep(0.02)  # let the close arrive, or not
                assert len(accepted) == 4

    run(main())


def test_a_close_racing_the_request_is_retried_once():
    """A reused connection that dies without answering (the keep-alive race) is retried
    on a fresh connection; a fresh connection that dies is not retried."""

    async def main():
        served_once = False

        async def handler(reader, writer):
            nonlocal served_once
            await read_request(reader)
            if not served_once:
                served_once = True
                writer.write(json_answer({"bookie_id": "x"}))
                await writer.drain()
                await read_request(reader)  # second request on this connection:
            writer.transport.abort()  # drop it without a byte

        async with raw_server(handler) as (addr, accepted):
            async with BookieClient(addr) as client:
                assert (await client.info())["bookie_id"] == "x"
                with pytest.raises(BookieUnavailable):
                    await client.info()  # reused dies -> retry on new -> dies too
                assert len(accepted) == 2

    run(main())


@pytest.mark.parametrize(
    "answer",
    [
        b"garbage\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\ncontent-length: nope\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 999999999999\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000 + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n",
    ],
    ids=["status", "short-body", "bad-length", "bad-chunk", "huge-body", "huge-head", "cut"],
)
def test_broken_http_is_bookie_unavailable(answer: bytes):
    """Whatever garbage comes back, the caller sees BookieUnavailable, not a hang or a
    stray exception type."""

    async def main():
        async def handler(reader, writer):
            await read_request(reader)
            writer.write(answer)
            await writer.drain()
            writer.close()

        async with raw_server(handler) as (addr, _):
            async with BookieClient(addr, request_timeout_s=2) as client:
                with pytest.raises(BookieUnavailable):
                    await client.info()

    run(main())


def test_a_large_body_is_read_whole_and_a_cut_one_is_refused():
    """A body over the transport's piece size, arriving in small writes, is read whole;
    one cut short after a few pieces is BookieUnavailable, and the next call works."""
    pad = "p" * (3 * limits.BODY_PIECE_BYTES + 12_345)
    whole = json_answer({"bookie_id": "big", "pad": pad})
    cut = whole[: len(whole) - len(pad) // 2]

    async def main():
        answers = [whole, cut, whole]

        async def handler(reader, writer):
            while answers:
                await read_request(reader)
                answer = answers.pop(0)
                for at in range(0, len(answer), 50_000):
                    writer.write(answer[at : at + 50_000])
                    await writer.drain()
                if answer is cut:
                    writer.close()
                    return

        async with raw_server(handler) as (addr, _):
            async with BookieClient(addr, request_timeout_s=5) as client:
                doc = await client.info()
                assert doc["bookie_id"] == "big" and doc["pad"] == pad
                with pytest.raises(BookieUnavailable):
                    await client.info()
                assert (await client.info())["pad"] == pad

    run(main())


def test_unframed_body_reads_to_eof_and_connection_close_is_honoured():
    """An answer without Content-Length runs to EOF; ``Connection: close`` answers are
    not reused."""

    async def main():
        async def handler(reader, writer):
            await read_request(reader)
            body = b'{"bookie_id": "eof"}'
            writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n" + body)
            await writer.drain()
            writer.close()

        async with raw_server(handler) as (addr, accepted):
            async with BookieClient(addr) as client:
                assert (await client.info())["bookie_id"] == "eof"
                assert (await client.info())["bookie_id"] == "eof"
                assert len(accepted) == 2

    run(main())


def test_cancelled_call_drops_its_connection_and_the_next_call_works():
    """Cancelling a call mid-request closes its connection, so the half-read answer never
    reaches the next caller."""

    async def main():
        count = 0

        async def handler(reader, writer):
            nonlocal count
            while True:
                await read_request(reader)
                count += 1
                if count == 1:
                    await asyncio.sleep(0.3)
                writer.write(json_answer({"n": count}))
                await writer.drain()

        async with raw_server(handler) as (addr, accepted):
            async with BookieClient(addr, connections_max=1) as client:
                task = asyncio.create_task(client.info())
                await asyncio.sleep(0.1)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert (await client.info())["n"] == 2
                assert len(accepted) == 2

    run(main())


def test_connect_timeout_is_bounded():
    """A connect that never completes (the listener's accept queue is full, so the
    kernel drops our SYNs) fails after connect_timeout_s."""

    async def main():
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        filler = socket.create_connection(("127.0.0.1", port))  # fills the queue
        client = BookieClient(f"127.0.0.1:{port}", connect_timeout_s=0.2, request_timeout_s=5)
        try:
            started = time.monotonic()
            with pytest.raises(BookieUnavailable, match="connect timed out"):
                await client.info()
            # The connect's 0.2 s, not the request's 5 s time-out (which would fail here).
            assert time.monotonic() - started < 2.0
        finally:
            await client.aclose()
            filler.close()
            listener.close()

    run(main())


def test_lengths_and_the_bookie_instance_reach_the_results_and_errors():
    """The LAC/fence answer's length, lac_length and instance_id land in LacInfo; the
    X-Quire-Bookie-Instance header lands in range and entry results and in the
    bookie_instance_id of a not-found error; without them the defaults say unknown."""
    lac_doc = {"ledger_id": 3, "lac": 1, "last_entry_id": 2, "fenced": True}
    answers = [
        json_answer({**lac_doc, "length": 30, "lac_length": 20, "instance_id": "abc"}),
        json_answer(lac_doc),
        json_answer(
            {"error": "ledger_not_found", "message": "no"}, 404, "x-quire-bookie-instance: abc\r\n"
        ),
        json_answer({"error": "entry_not_found", "message": "no"}, 404),
    ]
    body = framing.encode([record(3, 1)])
    answers.append(
        (
            f"HTTP/1.1 200 OK\r\ncontent-type: {framing.MEDIA_TYPE}\r\n"
            f"content-length: {len(body)}\r\nx-quire-last-entry-id: 2\r\n"
            "x-quire-bookie-instance: abc\r\n\r\n"
        ).encode()
        + body
    )

    async def handler(reader, writer):
        while answers:
            await read_request(reader)
            writer.write(answers.pop(0))
            await writer.drain()

    async def main():
        async with raw_server(handler) as (addr, _), BookieClient(addr) as client:
            assert await client.fence(3) == LacInfo(3, 1, 2, True, 30, 20, "abc")
            assert await client.read_lac(3) == LacInfo(3, 1, 2, True, -1, -1, None)
            with pytest.raises(LedgerNotFound) as missing:
                await client.read_range(3, 0, 5)
            assert missing.value.bookie_instance_id == "abc"
            with pytest.raises(EntryNotFound) as gone:
                await client.read_entry(3, 9)
            assert gone.value.bookie_instance_id is None
            page = await client.read_range(3, 0, 5)
            assert page.instance_id == "abc" and page.last_entry_id == 2

    run(main())


def test_the_bookie_instance_of_an_add_answer_reaches_the_add_result():
    """Issue 35 item 3: the X-Quire-Bookie-Instance header of an add answer lands in
    BookieAddResult.instance_id, for ``add`` and for the callback-driven ``start_add`` (the
    gateway's senders), and is None when the answer names no instance."""
    named = json_answer({"stored": 1, "rejected": []}, 200, "x-quire-bookie-instance: abc\r\n")
    answers = [named, json_answer({"stored": 1, "rejected": []}), named]

    async def handler(reader, writer):
        while answers:
            await read_request(reader)
            writer.write(answers.pop(0))
            await writer.drain()

    async def main():
        async with raw_server(handler) as (addr, _), BookieClient(addr) as client:
            assert await client.add([record(3, 0)]) == BookieAddResult(1, [], "abc")
            assert await client.add([record(3, 1)]) == BookieAddResult(1, [], None)
            done: asyncio.Future = asyncio.get_running_loop().create_future()
            client.start_add([record(3, 2)], 5.0, done.set_result)
            assert await asyncio.wait_for(done, 10) == BookieAddResult(1, [], "abc")

    run(main())
