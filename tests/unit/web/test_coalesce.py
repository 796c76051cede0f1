"""services/web/coalesce.py: an answer's head and body leave in one write; a head with no
body in the same loop turn still leaves (next turn); 100 Continue is never held; close
sends a held head first; large bodies are not copied behind the head."""

from __future__ import annotations

import asyncio

from services.web.coalesce import CoalescingTransport, HeadHoldingTransport
from services.web.limits import COALESCE_JOIN_MAX_BYTES

HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


class FakeTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.extra = {"peername": ("127.0.0.1", 1)}

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str) -> object:
        return self.extra.get(name)


async def turns(n: int = 3) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_head_and_body_leave_in_one_write() -> None:
    async def run() -> None:
        inner = FakeTransport()
        t = HeadHoldingTransport(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
        t.write(HEAD)
        assert inner.writes == []
        t.write(b"{}")
        assert inner.writes == [HEAD + b"{}"]
        t.write(b"more")  # later chunks go straight through
        await turns()
        assert inner.writes == [HEAD + b"{}", b"more"]
        assert t.get_extra_info("peername") == ("127.0.0.1", 1)  # the rest is delegated

    asyncio.run(run())


def test_a_head_without_a_body_leaves_on_the_next_turn() -> None:
    async def run() -> None:
        inner = FakeTransport()
        t = HeadHoldingTransport(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
        t.write(HEAD)  # a streamed answer whose first chunk is not ready yet
        await turns()
        assert inner.writes == [HEAD]
        t.write(b"chunk")
        assert inner.writes == [HEAD, b"chunk"]

    asyncio.run(run())


def test_100_continue_is_never_held_and_close_sends_a_held_head() -> None:
    async def run() -> None:
        inner = FakeTransport()
        t = HeadHoldingTransport(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
        t.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        assert inner.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
        t.write(HEAD)
        t.close()
        assert inner.writes[-1] == HEAD and inner.closed
        await turns()  # the scheduled flush finds nothing to send
        assert inner.writes.count(HEAD) == 1

    asyncio.run(run())


def test_a_large_body_is_written_after_the_head_not_joined() -> None:
    async def run() -> None:
        inner = FakeTransport()
        t = HeadHoldingTransport(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
        body = b"x" * (COALESCE_JOIN_MAX_BYTES + 1)
        t.write(HEAD)
        t.write(body)
        assert inner.writes == [HEAD, body]

    asyncio.run(run())


def test_frames_of_one_loop_turn_leave_in_one_write() -> None:
    """A WebSocket connection's frames written in one loop turn go out together on the
    next; later frames in a write of their own; close sends what is buffered first."""

    async def run() -> None:
        inner = FakeTransport()
        t = CoalescingTransport(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
        for frame in (b"a", b"bb", b"ccc"):
            t.write(frame)
        assert inner.writes == []
        await turns()
        assert inner.writes == [b"abbccc"]
        t.write(b"d")
        await turns()
        assert inner.writes == [b"abbccc", b"d"]
        t.write(b"last")
        t.close()
        assert inner.writes[-1] == b"last" and inner.closed
        t.write(b"after close")  # the flush finds the transport closing: nothing sent
        await turns()
        assert inner.writes == [b"abbccc", b"d", b"last"]
        assert t.get_extra_info("peername") == ("127.0.0.1", 1)

    asyncio.run(run())
