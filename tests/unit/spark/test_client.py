"""The connector's binary range read (services/spark/client.py ``read_range_spans``)
against a mock gateway: the body read as it arrives, in any cut, gives every frame once
and in order; a compressed body (a proxy's doing, never the gateway's) is decoded
first; a body ending inside a frame is a short read."""

from __future__ import annotations

import gzip
from collections.abc import Iterator

import httpx
import pytest

from services.protocol.logs import Position
from services.spark import client as client_module
from services.spark import limits as spark_limits
from services.spark.client import QuireSparkError, SparkGatewayClient
from services.wire.entries_stream import MEDIA_TYPE, encode_frames

ENTRIES = [(i, bytes([i % 251]) * (i * 37 % 3000)) for i in range(400)]
BODY = encode_frames(ENTRIES)


class Pieces(httpx.SyncByteStream):
    def __init__(self, body: bytes, size: int) -> None:
        self.body = body
        self.size = size

    def __iter__(self) -> Iterator[bytes]:
        for at in range(0, len(self.body), self.size):
            yield self.body[at : at + self.size]


def gateway(body: bytes, size: int, headers: dict[str, str] | None = None) -> SparkGatewayClient:
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.headers["accept"] == MEDIA_TYPE
        return httpx.Response(
            200, headers={"content-type": MEDIA_TYPE, **(headers or {})}, stream=Pieces(body, size)
        )

    return SparkGatewayClient("http://gw", transport=httpx.MockTransport(answer))


def spans_read(client: SparkGatewayClient) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    for data, spans in client.read_range_spans(1, 0, len(ENTRIES) - 1):
        got += [(entry_id, data[start:end]) for entry_id, start, end in spans]
    return got


@pytest.mark.parametrize("size", [1, 7, 4096, 65_536, len(BODY)])
def test_every_frame_comes_once_in_order_however_the_body_is_cut(
    size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spark_limits, "STREAM_CHUNK_BYTES", 100_000)
    with gateway(BODY, size) as client:
        assert spans_read(client) == ENTRIES


def test_a_compressed_body_is_decoded_first() -> None:
    with gateway(gzip.compress(BODY), 1000, {"content-encoding": "gzip"}) as client:
        assert spans_read(client) == ENTRIES


def test_a_body_ending_inside_a_frame_is_a_short_read() -> None:
    with gateway(BODY[:-5], 4096) as client, pytest.raises(QuireSparkError) as caught:
        spans_read(client)
    assert caught.value.code == "short_read"
    assert "ended inside a frame" in str(caught.value)


def test_clients_share_one_tls_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every client of a process uses one TLS context: building one loads the CA bundle
    (tens of ms), which each Spark task would pay again."""
    made: list[object] = []
    real = httpx.create_ssl_context

    def counting() -> object:
        made.append(real())
        return made[-1]

    monkeypatch.setattr(httpx, "create_ssl_context", counting)
    client_module._context.cache_clear()
    try:
        clients = [SparkGatewayClient(f"https://gw{i}") for i in range(3)]
        for each in clients:
            assert each.http is not None
            each.close()
        assert len(made) == 1
    finally:
        client_module._context.cache_clear()


def test_a_position_at_a_time_is_the_first_record_found_or_the_end() -> None:
    """``position_at_time`` asks one record from_time=T: its position, else the page's
    next (the end of the log), else None (a log without ledgers: its start)."""
    pages = [
        {"records": [{"position": {"ledger_id": 4, "entry_id": 2}, "data": "", "time": 9}],
         "next": "4:3", "caught_up": False},
        {"records": [], "next": "5:0", "caught_up": True},
        {"records": [], "next": None, "caught_up": True},
        {"records": "nope"},
    ]  # fmt: skip
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=pages[len(seen) - 1])

    client = SparkGatewayClient("http://gw", transport=httpx.MockTransport(answer))
    assert client.position_at_time("orders", 123) == Position(4, 2)
    assert dict(seen[0].url.params) == {"from_time": "123", "limit": "1"}
    assert seen[0].url.path == "/v1/logs/orders/records"
    assert client.position_at_time("orders", 123) == Position(5, 0)
    assert client.position_at_time("orders", 123) is None
    with pytest.raises(QuireSparkError, match="malformed"):
        client.position_at_time("orders", 123)
