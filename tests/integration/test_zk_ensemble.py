"""The metadata store against a real three-server ZooKeeper ensemble."""

from __future__ import annotations

import asyncio

from services.errors import QuireError
from services.zk.store import MetadataStore
from tests.harness import ZooKeeperEnsemble


def test_store_survives_losing_one_server(zk_ensemble: ZooKeeperEnsemble):
    """With one of three servers killed (SIGKILL) the store reconnects to the others and
    compare-and-set keeps working; what was written before is still there."""

    async def main():
        store = MetadataStore(zk_ensemble.connect_string + "/ensemble-test", session_timeout_s=6)
        await store.start(30)
        try:
            await store.create("/k", b"v0")
            version = (await store.get("/k")).version
            victim = zk_ensemble.servers[0]
            victim.kill()
            try:
                deadline = asyncio.get_running_loop().time() + 30
                while True:
                    try:
                        version = await store.set("/k", b"v1", version)
                        break
                    except QuireError:
                        if asyncio.get_running_loop().time() > deadline:
                            raise
                        await asyncio.sleep(0.2)  # poll with a deadline: reconnecting
                assert (await store.get("/k")).data == b"v1"
            finally:
                victim.start()
                victim.wait_ready(60)
        finally:
            await store.stop()

    asyncio.run(main())
