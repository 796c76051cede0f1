"""The add time-out of the bookie client (issue 7 item 8b): ``add(records, timeout_s)``
bounds an add by its own, shorter time-out instead of the client's general request
time-out, so a bookie that hangs fails the gateway's adds quickly (as
``BookieUnavailable``, which the senders map to UNAVAILABLE)."""

from __future__ import annotations

import asyncio
import time

import pytest

from services.bookie_client import BookieClient
from services.errors import BookieUnavailable
from tests.unit.bookie_client.test_client import json_answer, raw_server, read_request, record


def test_an_add_times_out_after_its_own_timeout_and_other_calls_keep_theirs() -> None:
    """A bookie that reads the add and never answers: the add fails with
    BookieUnavailable after ``timeout_s`` (0.2 s), far below the client's request
    time-out (30 s); without ``timeout_s`` an add that is answered still succeeds."""

    async def main() -> None:
        hang = True

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while True:
                await read_request(reader)
                if hang:
                    await asyncio.sleep(60)
                writer.write(json_answer({"stored": 1, "rejected": []}))
                await writer.drain()

        async with raw_server(handler) as (addr, _accepted):
            client = BookieClient(addr, request_timeout_s=30)
            started = time.monotonic()
            with pytest.raises(BookieUnavailable, match="no answer within 0.2s"):
                await client.add([record(1, 0)], timeout_s=0.2)
            assert 0.15 < time.monotonic() - started < 2.0
            hang = False
            result = await client.add([record(1, 0)])
            assert result.stored == 1 and result.rejected == []
            await client.aclose()

    asyncio.run(main())
