"""The gateway's coalescing LAC sender (services/ledger_client/senders.py)."""

from __future__ import annotations

import asyncio

from services.errors import BookieUnavailable
from services.ledger_client.lac_sender import LacSender


class FakeClient:
    def __init__(self, fail: bool = False) -> None:
        self.requests: list[dict[int, int]] = []
        self.release = asyncio.Event()
        self.fail = fail

    async def write_lacs(self, lacs: dict[int, int]) -> int:
        self.requests.append(dict(lacs))
        await self.release.wait()
        if self.fail:
            raise BookieUnavailable("down")
        return len(lacs)


def test_updates_queued_during_a_request_go_out_together():
    """One request in flight per bookie; updates made meanwhile are coalesced into the
    next request, keeping the highest LAC per ledger."""

    async def main():
        client = FakeClient()
        sender = LacSender("b1", lambda: client)
        sender.update(1, 0)
        await asyncio.sleep(0)  # the first request starts
        for ledger_id, lac in [(1, 3), (2, 5), (1, 2), (3, 0)]:
            sender.update(ledger_id, lac)
        assert client.requests == [{1: 0}]
        client.release.set()
        for _ in range(10):
            await asyncio.sleep(0)
        assert client.requests == [{1: 0}, {1: 3, 2: 5, 3: 0}]
        await sender.aclose()

    asyncio.run(main())


def test_a_failed_update_is_dropped_and_the_sender_goes_on():
    """LAC updates are best effort: a failing bookie does not stop later updates."""

    async def main():
        client = FakeClient(fail=True)
        client.release.set()
        sender = LacSender("b1", lambda: client)
        sender.update(1, 1)
        for _ in range(10):
            await asyncio.sleep(0)
        sender.update(1, 2)
        for _ in range(10):
            await asyncio.sleep(0)
        assert client.requests == [{1: 1}, {1: 2}]
        await sender.aclose()

    asyncio.run(main())
