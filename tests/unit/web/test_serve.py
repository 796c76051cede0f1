"""services/web/serve.py's ``FrozenHeapServer`` on a real uvloop and real sockets: a burst
of connections is accepted in a few turns of the event loop (uvloop alone takes one a
turn), and shutdown closes every descriptor of the listening socket."""

from __future__ import annotations

import asyncio
import gc
import socket
from typing import Any

import pytest
import uvicorn
import uvloop
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from services.cluster.processes import free_port
from services.web import limits, serve

BURST = 64
DEADLINE_S = 10.0


async def hello(scope: dict[str, Any], receive: Any, send: Any) -> None:
    headers = [(b"content-length", b"5")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"hello"})


@pytest.mark.parametrize(("watchers", "turns_min", "turns_max"), [(1, BURST - 4, None), (8, 0, 10)])
def test_a_burst_of_connections_is_accepted_in_a_few_turns_of_the_loop(
    monkeypatch: pytest.MonkeyPatch, watchers: int, turns_min: int, turns_max: int | None
) -> None:
    """64 connections waiting in the accept queue: with one watcher (uvloop as it is)
    they are accepted one per turn of the loop; with 8 watchers within 10 turns. The
    server still answers on them, and after shutdown the port refuses connections."""
    monkeypatch.setattr(limits, "ACCEPT_WATCHERS", watchers)
    monkeypatch.setattr(gc, "freeze", lambda: None)  # the test process's heap stays as it is
    turn = 0
    accepted_at: list[int] = []

    class Counting(HttpToolsProtocol):
        def connection_made(self, transport: Any) -> None:
            accepted_at.append(turn)
            super().connection_made(transport)

    port = free_port()
    config = uvicorn.Config(
        hello, host="127.0.0.1", port=port, http=Counting, lifespan="off", log_config=None
    )
    server = serve.FrozenHeapServer(config)

    async def main() -> None:
        nonlocal turn
        loop = asyncio.get_running_loop()
        serving = asyncio.ensure_future(server.serve())
        deadline = loop.time() + DEADLINE_S
        while not server.started:
            assert loop.time() < deadline, "the server did not start"
            await asyncio.sleep(0.01)
        # The kernel completes each handshake into the accept queue by itself.
        clients: list[socket.socket] = []
        try:
            clients += [socket.create_connection(("127.0.0.1", port)) for _ in range(BURST)]

            def tick() -> None:  # runs once per turn of the loop
                nonlocal turn
                turn += 1
                if len(accepted_at) < BURST and loop.time() < deadline:
                    loop.call_soon(tick)

            loop.call_soon(tick)
            while len(accepted_at) < BURST:
                assert loop.time() < deadline, f"{len(accepted_at)} of {BURST} accepted"
                await asyncio.sleep(0)
            spread = accepted_at[-1] - accepted_at[0]
            assert spread >= turns_min, accepted_at
            if turns_max is not None:
                assert spread <= turns_max, accepted_at
            client = clients[-1]
            client.setblocking(False)
            await loop.sock_sendall(client, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while not answer.endswith(b"\r\n\r\nhello"):
                chunk = await asyncio.wait_for(loop.sock_recv(client, 4096), DEADLINE_S)
                assert chunk, answer
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200")
        finally:  # the server stops, and the clients close, whatever failed
            for each in clients:
                each.close()
            server.should_exit = True
            await asyncio.wait_for(serving, DEADLINE_S)

    uvloop.run(main())
    assert len(server.servers) == watchers
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
