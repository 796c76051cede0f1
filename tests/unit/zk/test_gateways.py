"""The live gateways' view (services/zk/gateways.py): who is registered, and the
futures and waits that end when a gateway's registration goes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

from services.zk.gateways import GatewayDirectory, GatewayInfo
from services.zk.store import MetadataStore


class Watched:
    """The store's two calls the directory makes at start; the test moves the children."""

    def __init__(self) -> None:
        self.callback: Callable[[list[str]], None] | None = None

    async def ensure_path(self, path: str) -> None:
        assert path == "/gateways"

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> Any:
        self.callback = callback
        callback(["a:1", "b:2"])
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def test_gone_and_wait_gone_end_when_the_registration_goes() -> None:
    async def body() -> None:
        store = Watched()
        directory = GatewayDirectory(cast(MetadataStore, store))
        await directory.start()
        assert directory.is_live("a:1") and directory.is_live("b:2")
        assert directory.gone("c:3").done()  # not registered: gone already
        gone = directory.gone("a:1")
        assert directory.gone("a:1") is gone and not gone.done()
        assert await directory.wait_gone("a:1", 0.05) is False  # still there
        waiting = asyncio.ensure_future(directory.wait_gone("a:1", 5.0))
        await asyncio.sleep(0)
        assert store.callback is not None
        store.callback(["b:2"])
        assert await waiting is True and gone.done()
        assert not directory.is_live("a:1") and not directory.gone("b:2").done()

    asyncio.run(body())


def test_a_registration_is_read_leniently() -> None:
    """A registration's JSON says how to reach the gateway; anything else in it (or none)
    means plain HTTP, not draining."""
    assert GatewayInfo.parse("h:1", b'{"scheme": "https", "draining": true}') == GatewayInfo(
        "h:1", "https", True
    )
    for data in (b"", b"not json", b"[1]", b'{"scheme": "gopher", "draining": "yes"}'):
        assert GatewayInfo.parse("h:1", data) == GatewayInfo("h:1", "http", False)
