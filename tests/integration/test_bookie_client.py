"""The bookie client against real bookie processes: every call, the error mapping of
real answers, and the transport surviving a bookie that restarts, dies or hangs."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from services.bookie_client import BookieAddResult, BookieClient, BookieClientPool
from services.bookie_client.limits import REQUEST_TIMEOUT_S
from services.errors import (
    BookieReadOnly,
    BookieUnavailable,
    EntryNotFound,
    InvalidArgument,
    LedgerNotFound,
    Unauthorized,
)
from services.wire import digest, framing

SECRET = "integration-secret-xyz"


def sealed(lid: int, eid: int, payload: bytes, recovery: bool = False) -> framing.FramedRecord:
    record = framing.FramedRecord(
        lid, eid, eid - 1, payload, recovery=recovery, digest_type="crc32c", length=eid
    )
    return digest.seal(record)


def test_every_call_against_a_real_bookie(cluster):
    """Adds, reads, LAC, fence, list, delete and info behave as docs/api.md "Bookie" says."""
    cluster.secret = SECRET
    bookie = cluster.start_bookie()

    async def main():
        async with BookieClient(bookie.url, SECRET) as client:
            instance = (await client.info())["instance_id"]  # every answer names it
            records = [sealed(11, i, bytes([i]) * (100 * i + 1)) for i in range(10)]
            assert await client.add(records) == BookieAddResult(10, [], instance)
            assert await client.read_entry(11, 4) == records[4]
            assert digest.record_ok(await client.read_entry(11, 9))

            page = await client.read_range(11, 2, 7)
            assert page.records == records[2:8] and page.last_entry_id == 9
            assert (await client.read_range(11, 0, 9, max_entries=3)).records == records[:3]

            lac = await client.read_lac(11)
            assert (lac.ledger_id, lac.lac, lac.last_entry_id, lac.fenced) == (11, 8, 9, False)
            assert (await client.write_lac(11, 9)).lac == 9
            assert (await client.write_lac(11, 3)).lac == 9  # keeps the maximum

            fenced = await client.fence(11)
            assert fenced.fenced and fenced.last_entry_id == 9
            result = await client.add([sealed(11, 10, b"late"), sealed(11, 11, b"r", True)])
            assert result == BookieAddResult(1, [(11, 10, "ledger_fenced")], instance)

            await client.add([sealed(12, 0, b"other")])
            ids, nxt = await client.list_ledgers()
            assert {11, 12} <= set(ids) and nxt is None
            first, nxt = await client.list_ledgers(limit=1)
            assert len(first) == 1 and nxt is not None

            info = await client.info()
            assert info["state"] == "writable" and info["address"].endswith(str(bookie.port))

            await client.delete_ledger(12)
            with pytest.raises(LedgerNotFound):
                await client.read_entry(12, 0)

    asyncio.run(main())


def test_real_error_answers_map_to_their_classes(cluster):
    """Unknown ledger/entry, a bad digest, a wrong secret and a read-only bookie raise
    the matching QuireError (a bad digest is refused for its record only)."""
    cluster.secret = SECRET
    bookie = cluster.start_bookie()

    async def main():
        async with BookieClient(bookie.address, SECRET) as client:
            with pytest.raises(LedgerNotFound):
                await client.read_entry(404, 0)
            with pytest.raises(LedgerNotFound):
                await client.read_range(404, 0, 10)
            with pytest.raises(LedgerNotFound):
                await client.read_lac(404)
            with pytest.raises(LedgerNotFound):
                await client.delete_ledger(404)
            await client.add([sealed(1, 0, b"a")])
            with pytest.raises(EntryNotFound):
                await client.read_entry(1, 5)
            bad = sealed(1, 1, b"payload")._replace(digest=b"\0\0\0\0")
            instance = (await client.info())["instance_id"]
            assert await client.add([bad]) == BookieAddResult(
                0, [(1, 1, "invalid_argument")], instance
            )
            with pytest.raises(InvalidArgument):
                await client.read_range(1, 5, 4)  # from > to

        async with BookieClient(bookie.address, "not-the-secret-42") as intruder:
            with pytest.raises(Unauthorized) as info:
                await intruder.fence(1)
            assert "not-the-secret-42" not in info.value.message
        async with BookieClient(bookie.address, None) as anonymous:
            with pytest.raises(Unauthorized):
                await anonymous.info()

    asyncio.run(main())


def test_read_only_bookie_refuses_normal_adds(cluster):
    """A read-only bookie answers BookieReadOnly to normal adds and still takes recovery
    adds (threshold raised at run time, not a full disk)."""
    bookie = cluster.start_bookie(extra_args=["--disk-check-interval", "0.1"])

    async def main():
        async with BookieClient(bookie.address) as client:
            async with httpx.AsyncClient() as admin:
                r = await admin.post(
                    f"{bookie.url}/v1/admin/disk-threshold", json={"readonly_free_ratio": 1.0}
                )
                assert r.status_code == 200, r.text
            end = time.monotonic() + 10
            while (await client.info())["state"] != "readonly":
                assert time.monotonic() < end, "bookie never went read-only"
                await asyncio.sleep(0.1)
            with pytest.raises(BookieReadOnly):
                await client.add([sealed(3, 0, b"x")])
            assert (await client.add([sealed(3, 0, b"x", recovery=True)])).stored == 1

    asyncio.run(main())


def test_client_survives_a_bookie_restart(cluster):
    """After the bookie restarts, the pooled keep-alive connections are dead; the next
    call reconnects by itself and succeeds."""
    bookie = cluster.start_bookie()

    async def main():
        pool = BookieClientPool(None, request_timeout_s=5)
        try:
            client = pool.get(bookie.address)
            await asyncio.gather(*(client.add([sealed(5, i, b"x")]) for i in range(8)))
            await asyncio.to_thread(bookie.restart)
            assert (await client.read_entry(5, 7)).payload == b"x"
            assert (await client.add([sealed(5, 8, b"y")])).stored == 1
        finally:
            await pool.aclose()

    asyncio.run(main())


# A call against a hung (0.5 s time-out) or killed bookie ends within this: seconds of
# room for a loaded machine, far below the client's default 10 s request time-out
# (REQUEST_TIMEOUT_S) that a call ignoring its own bound would wait for.
HUNG_BOUND_S = 3.0


def test_dead_and_hung_bookies_are_unavailable_within_the_bound(cluster):
    """A SIGSTOPped bookie gives BookieUnavailable after request_timeout_s; a killed
    one gives it at once, well before the default 10 s time-out. Neither hangs the
    caller. (The bounds leave a loaded machine seconds of room and still fail a call
    that waits for the 10 s default time-out instead of its own.)"""
    bookie = cluster.start_bookie()

    async def main():
        async with BookieClient(bookie.address, request_timeout_s=0.5) as client:
            await client.add([sealed(6, 0, b"x")])
            bookie.pause()
            try:
                started = time.monotonic()
                with pytest.raises(BookieUnavailable):
                    await client.read_entry(6, 0)
                assert time.monotonic() - started < HUNG_BOUND_S
            finally:
                bookie.resume()
            assert (await client.read_entry(6, 0)).payload == b"x"
            # The default time-out from here: "at once" must not be "after 0.5 s".
            client.request_timeout_s = REQUEST_TIMEOUT_S
            bookie.kill()
            started = time.monotonic()
            with pytest.raises(BookieUnavailable):
                await client.read_entry(6, 0)
            assert time.monotonic() - started < HUNG_BOUND_S

    asyncio.run(main())


def test_start_add_answers_as_add_does_and_survives_restarts_and_hangs(cluster):
    """The gateway's callback-driven add (``start_add``, services/bookie_client/channel.py)
    against a real bookie: the same ``BookieAddResult`` as ``add`` (a fenced ledger's refusal
    included), the same errors (a wrong secret is ``Unauthorized``), one connection
    reused, a bookie restart answered on a new connection, a paused bookie a
    ``BookieUnavailable`` within the time-out, and ``done`` never called from inside
    ``start_add``."""
    cluster.secret = SECRET
    bookie = cluster.start_bookie()

    async def start_add(client: BookieClient, records, timeout_s: float = 5.0):
        future = asyncio.get_running_loop().create_future()
        client.start_add(records, timeout_s, future.set_result, "req-start-add")
        assert not future.done()  # answered on a later loop turn, never from the call
        return await future

    async def main():
        async with BookieClient(bookie.address, SECRET) as client:
            instance = (await client.info())["instance_id"]  # a restart keeps it
            records = [sealed(21, i, bytes([i]) * 300) for i in range(5)]
            assert await start_add(client, records) == BookieAddResult(5, [], instance)
            assert [await client.read_entry(21, i) for i in range(5)] == records
            await client.fence(21)
            late = [sealed(21, 5, b"late"), sealed(21, 6, b"r", recovery=True)]
            assert await start_add(client, late) == BookieAddResult(
                1, [(21, 5, "ledger_fenced")], instance
            )
            assert len(client._adds.channel._idle) == 1  # one keep-alive connection, reused

            await asyncio.to_thread(bookie.restart)
            assert await start_add(client, [sealed(22, 0, b"after")]) == BookieAddResult(
                1, [], instance
            )

            bookie.pause()
            try:
                started = time.monotonic()
                error = await start_add(client, [sealed(22, 1, b"hung")], timeout_s=0.5)
                assert isinstance(error, BookieUnavailable), error
                assert "no answer within 0.5s" in error.message
                assert time.monotonic() - started < HUNG_BOUND_S
            finally:
                bookie.resume()
            assert await start_add(client, [sealed(22, 1, b"hung")]) == BookieAddResult(
                1, [], instance
            )

        async with BookieClient(bookie.address, "not-the-secret-42") as intruder:
            error = await start_add(intruder, [sealed(23, 0, b"x")])
            assert isinstance(error, Unauthorized) and "not-the-secret-42" not in error.message
        bookie.kill()
        async with BookieClient(bookie.address, SECRET) as client:
            error = await start_add(client, [sealed(23, 0, b"x")])
            assert isinstance(error, BookieUnavailable), error

    asyncio.run(main())
