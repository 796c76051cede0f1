"""A scripted HTTP/1.1 server for the tests of our raw HTTP clients (the bookie client's
add channel, the bench's load connections): it reads each request (head and
``Content-Length`` body) and lets the test's script answer it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

# The script answers the n-th request (from 1) on ``writer``; False closes the connection.
Script = Callable[[int, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool]]


class ScriptedServer:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[tuple[bytes, bytes]] = []  # (head, body)
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                self.requests.append((head, await reader.readexactly(length)))
                if not await self.script(len(self.requests), reader, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    async def start(self) -> asyncio.Server:
        """Listen on 127.0.0.1 (a free port: ``server.sockets[0].getsockname()[1]``)."""
        return await asyncio.start_server(self.handle, "127.0.0.1", 0)


def reply(raw: bytes, keep_open: bool = True) -> Script:
    """A script that answers every request with ``raw`` (closing after it unless
    ``keep_open``)."""

    async def script(n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(raw)
        await writer.drain()
        return keep_open

    return script
