"""The bookie client sends the request id of the request being served
(services/request_ids.py) as ``X-Request-Id``, and none outside a request; its other
headers (the cluster secret, the content type) are unchanged."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from services.bookie_client import BookieClient
from services.bookie_client.transport import HttpResponse
from services.request_ids import REQUEST_ID
from services.wire import framing


class RecordingTransport:
    """Answers every call with an empty add or LAC answer; remembers the headers sent."""

    def __init__(self) -> None:
        self.sent: list[dict[str, str]] = []

    async def request(
        self, method: str, target: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> HttpResponse:
        self.sent.append(dict(headers))
        if target == "/v1/entries":
            return HttpResponse(200, {}, b'{"stored": 1, "rejected": []}')
        return HttpResponse(
            200, {}, b'{"ledger_id": 3, "lac": 4, "last_entry_id": 4, "fenced": false}'
        )

    async def aclose(self) -> None:
        pass


def test_calls_carry_the_current_request_id() -> None:
    """Inside a request the id travels on every call (add, LAC read); outside none is
    sent; the client's own header dict is never changed."""

    async def run() -> list[dict[str, str]]:
        transport = RecordingTransport()
        client = BookieClient("127.0.0.1:1", "sec", transport=transport)
        await client.read_lac(3)
        token = REQUEST_ID.set("req-42")
        try:
            await client.add([framing.FramedRecord(3, 0, -1, b"x")])
            await client.read_lac(3)
        finally:
            REQUEST_ID.reset(token)
        await client.read_lac(3)
        return transport.sent

    sent = asyncio.run(run())
    assert [h.get("X-Request-Id") for h in sent] == [None, "req-42", "req-42", None]
    assert all(h["X-Cluster-Secret"] == "sec" for h in sent)
    assert sent[1]["Content-Type"] == framing.MEDIA_TYPE
    assert "Content-Type" not in sent[3]
