"""``AddChannel`` (services/bookie_client/channel.py) against a scripted HTTP/1.1 server on
127.0.0.1: answers read whole however they are split, one connection reused, a stale
connection's request sent once more, and every way an answer can go wrong ending the
request with its error, within its time-out, and the connection with it."""

from __future__ import annotations

import asyncio
import time

import pytest

from services.bookie_client.channel import AddChannel
from services.bookie_client.transport import HttpResponse, ProtocolError
from tests.scripted_http import Script, ScriptedServer, reply

OK = b"HTTP/1.1 200 OK\r\ncontent-length: 14\r\n\r\n" + b'{"stored": 1,}'
close_after_each = reply(OK.replace(b"\r\n\r\n", b"\r\nconnection: close\r\n\r\n", 1), False)
half_head_then_close = reply(b"HTTP/1.1 200 OK\r\ncontent-le", keep_open=False)
no_length = reply(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n")
extra_bytes = reply(OK + b"HTTP/1.1 200 OK\r\n")
not_http = reply(b"SSH-2.0-OpenSSH\r\n\r\n")


async def _exchange(
    script: Script, count: int, timeout_s: float = 2.0
) -> tuple[list, ScriptedServer]:
    """``count`` requests one after the other through one channel: what each ended with."""
    server = ScriptedServer(script)
    listener = await server.start()
    port = listener.sockets[0].getsockname()[1]
    channel = AddChannel("127.0.0.1", port, connect_timeout_s=1.0)
    results = []
    try:
        for n in range(count):
            future: asyncio.Future = asyncio.get_running_loop().create_future()
            request = b"POST /v1/entries HTTP/1.1\r\nContent-Length: 3\r\n\r\n%03d" % n
            channel.start(request, timeout_s, future.set_result)
            assert not future.done()  # never answered from inside start
            results.append(await future)
    finally:
        await channel.aclose()
        listener.close()
    return results, server


async def answer_in_pieces(n: int, reader, writer) -> bool:
    for piece in (OK[:5], OK[5:40], OK[40:]):
        writer.write(piece)
        await writer.drain()
        await asyncio.sleep(0.01)
    return True


def test_answers_in_pieces_on_one_reused_connection() -> None:
    results, server = asyncio.run(_exchange(answer_in_pieces, 3))
    assert [(r.status, r.body) for r in results] == [(200, b'{"stored": 1,}')] * 3
    assert isinstance(results[0], HttpResponse) and results[0].headers["content-length"] == "14"
    assert server.connections == 1
    assert [body for _, body in server.requests] == [b"000", b"001", b"002"]


async def close_idle_after_first(n: int, reader, writer) -> bool:
    """The first answer is kept alive; the connection is then closed when the next
    request arrives, before a byte of its answer (a keep-alive expiry racing it)."""
    if n == 1:
        writer.write(OK)
        await writer.drain()
        return True
    if n == 2:
        return False
    writer.write(OK)
    await writer.drain()
    return True


def test_connection_close_and_a_stale_connection_go_on_new_connections() -> None:
    results, server = asyncio.run(_exchange(close_after_each, 3))
    assert all(r.status == 200 for r in results) and server.connections == 3
    results, server = asyncio.run(_exchange(close_idle_after_first, 2))
    assert all(r.status == 200 for r in results), results
    # The second request reached the server twice: the stale connection, then a new one.
    assert [body for _, body in server.requests] == [b"000", b"001", b"001"]
    assert server.connections == 2


async def never_answer(n: int, reader, writer) -> bool:
    await asyncio.sleep(30)
    return True


@pytest.mark.parametrize(
    ("script", "error", "text"),
    [
        (never_answer, TimeoutError, ""),
        (half_head_then_close, ProtocolError, "middle of an answer"),
        (no_length, ProtocolError, "without a Content-Length"),
        (extra_bytes, ProtocolError, "bytes after the answer"),
        (not_http, ProtocolError, "bad status line"),
    ],
)
def test_a_bad_or_missing_answer_fails_its_request(script: Script, error: type, text: str) -> None:
    started = time.monotonic()
    results, server = asyncio.run(_exchange(script, 2, timeout_s=0.3))
    assert all(isinstance(r, error) and text in str(r) for r in results), results
    assert server.connections == 2  # the failed connection was not used again
    assert time.monotonic() - started < 2.0


def test_refused_connect_fails_the_request_and_a_closed_channel_answers_nothing() -> None:
    async def main() -> None:
        probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = probe.sockets[0].getsockname()[1]
        probe.close()
        await probe.wait_closed()
        channel = AddChannel("127.0.0.1", port, connect_timeout_s=1.0)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        channel.start(b"POST / HTTP/1.1\r\n\r\n", 1.0, future.set_result)
        assert isinstance(await future, OSError)

        server = ScriptedServer(never_answer)
        listener = await server.start()
        channel = AddChannel("127.0.0.1", listener.sockets[0].getsockname()[1], 1.0)
        answered: list = []
        channel.start(b"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 5.0, answered.append)
        deadline = time.monotonic() + 5
        while not server.requests:
            assert time.monotonic() < deadline, "the request never reached the server"
            await asyncio.sleep(0.01)
        await channel.aclose()
        await asyncio.sleep(0.05)
        assert answered == []  # dropped: its sender is closing too
        channel.start(b"POST / HTTP/1.1\r\n\r\n", 1.0, answered.append)
        assert answered == []  # not from inside start: on the next loop turn
        await asyncio.sleep(0)
        assert len(answered) == 1 and "closed" in str(answered[0])
        listener.close()

    asyncio.run(main())
