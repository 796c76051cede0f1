"""BookieClient.stored / stored_many and StoredInfo against raw loopback servers: what
is sent, how answers parse, how errors, malformed answers and time-outs map."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from services.bookie_client import BookieClient, StoredInfo
from services.errors import BookieUnavailable, InvalidArgument, LedgerNotFound
from services.limits import STORED_BATCH_MAX
from tests.unit.bookie_client.test_client import json_answer, raw_server, read_request, run

DOC = {
    "ledger_id": 7,
    "ranges": [[0, 1], [3, 4], [9, 9]],
    "entries": 5,
    "last_entry_id": 9,
    "fenced": True,
    "checked": 5,
    "corrupt": [4],
}


def serve_docs(answers: list[bytes], seen: list[tuple[bytes, bytes]]):
    """A handler answering each request with the next of ``answers``; records heads
    and bodies in ``seen``."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while answers:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = await reader.readexactly(length) if length else b""
            seen.append((head, body))
            writer.write(answers.pop(0))
            await writer.drain()

    return handler


def test_holds_bisects_the_runs() -> None:
    """holds is true exactly for the ids inside a listed run."""
    info = StoredInfo(1, True, ((0, 1), (3, 4), (9, 9)), 5, 9, False)
    assert [e for e in range(12) if info.holds(e)] == [0, 1, 3, 4, 9]
    assert not StoredInfo(1, False, (), 0, -1, False).holds(0)


def test_stored_sends_verify_and_parses_the_answer() -> None:
    """stored asks GET /v1/ledgers/{id}/stored?verify=..., and the answer becomes a
    StoredInfo (known, with ranges and corrupt as tuples)."""

    async def main() -> None:
        seen: list[tuple[bytes, bytes]] = []
        async with raw_server(serve_docs([json_answer(DOC)], seen)) as (addr, _):
            async with BookieClient(addr) as client:
                info = await client.stored(7, verify="all")
        assert seen[0][0].startswith(b"GET /v1/ledgers/7/stored?verify=all HTTP/1.1")
        assert info == StoredInfo(7, True, ((0, 1), (3, 4), (9, 9)), 5, 9, True, 5, (4,))
        assert info.holds(3) and not info.holds(2) and info.truncated is False

    run(main())


def test_stored_many_keeps_order_and_unknown_ledgers() -> None:
    """stored_many posts the ids and verify, and answers one StoredInfo per id in the
    order asked; unknown ledgers come back known False, truncated is carried."""
    unknown = {
        "ledger_id": 3,
        "known": False,
        "ranges": [],
        "entries": 0,
        "last_entry_id": -1,
        "fenced": False,
        "checked": 0,
        "corrupt": [],
    }
    cut = {**DOC, "known": True, "truncated": True}

    async def main() -> None:
        seen: list[tuple[bytes, bytes]] = []
        answer = json_answer({"ledgers": [cut, unknown]})
        async with raw_server(serve_docs([answer], seen)) as (addr, _):
            async with BookieClient(addr) as client:
                infos = await client.stored_many([7, 3], verify="sample")
                assert await client.stored_many([]) == []
        assert seen[0][0].startswith(b"POST /v1/stored HTTP/1.1")
        assert json.loads(seen[0][1]) == {"ledger_ids": [7, 3], "verify": "sample"}
        assert [i.ledger_id for i in infos] == [7, 3]
        assert infos[0].truncated and infos[0].known
        assert infos[1] == StoredInfo(3, False, (), 0, -1, False)

    run(main())


@pytest.mark.parametrize(
    "doc",
    [
        {"ledgers": [DOC]},  # one answer for two ledgers
        {"ledgers": [DOC, {**DOC, "ledger_id": 8}]},  # wrong order
        {"ledgers": [DOC, {**DOC, "ranges": [[5, 2]]}]},
        {"ledgers": [DOC, {**DOC, "ranges": [[0, 3], [2, 5]]}]},
        {"ledgers": [DOC, {**DOC, "corrupt": "x"}]},
        {"nope": 1},
    ],
)
def test_malformed_answers_are_bookie_failures(doc: dict) -> None:
    """An answer that does not fit the request or the schema is BookieUnavailable."""

    async def main() -> None:
        async with raw_server(serve_docs([json_answer(doc)], [])) as (addr, _):
            async with BookieClient(addr) as client:
                with pytest.raises(BookieUnavailable, match="malformed answer"):
                    await client.stored_many([7, 7])

    run(main())


def test_errors_and_local_refusals() -> None:
    """A 404 answer is LedgerNotFound; bad verify values and oversized lists are refused
    before anything is sent."""

    async def main() -> None:
        seen: list[tuple[bytes, bytes]] = []
        gone = json_answer({"error": "ledger_not_found", "message": "no"}, status=404)
        async with raw_server(serve_docs([gone], seen)) as (addr, _):
            async with BookieClient(addr) as client:
                with pytest.raises(LedgerNotFound):
                    await client.stored(7)
                with pytest.raises(InvalidArgument):
                    await client.stored(7, verify="most")
                with pytest.raises(InvalidArgument):
                    await client.stored_many([1], verify="all")
                with pytest.raises(InvalidArgument):
                    await client.stored_many(list(range(STORED_BATCH_MAX + 1)))
        assert len(seen) == 1

    run(main())


def test_a_bookie_that_never_answers_costs_the_given_timeout() -> None:
    """timeout_s bounds both calls: past it they raise BookieUnavailable."""

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(30)

    async def main() -> None:
        async with raw_server(silent) as (addr, _):
            async with BookieClient(addr, request_timeout_s=30) as client:
                for call in (client.stored(7, timeout_s=0.3), client.stored_many([7], "none", 0.3)):
                    started = time.monotonic()
                    with pytest.raises(BookieUnavailable, match="no answer within"):
                        await call
                    assert time.monotonic() - started < 2.0

    run(main())
