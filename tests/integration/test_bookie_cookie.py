"""The cookie binds a bookie's identity to its data dir: a wiped, swapped or orphaned data dir
refuses to start with a message that says how to format it; formatting lets it start empty."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from bookie.cookie import BookieRunning, format_bookie
from services.cluster.processes import free_port
from services.zk import paths as zkpaths
from services.zk.store import MetadataStore
from tests.integration.bookie_support import Bookie, exit_code_and_log, sealed


def run_format(cluster, bookie_id: str, data_dir) -> None:
    async def main():
        store = MetadataStore(cluster.zk_connect + cluster.zk_root, session_timeout_s=4)
        await store.start(10)
        try:
            await format_bookie(store, bookie_id, data_dir)
        finally:
            await store.stop()

    asyncio.run(main())


def refused(cluster, data_dir, port: int) -> str:
    proc = cluster.start_bookie(data_dir=data_dir, port=port, wait=False)
    code, log = exit_code_and_log(proc)
    assert code == 3, log
    lines = [line for line in log.splitlines() if "error:" in line]
    assert len(lines) == 1, log
    return lines[0]


def test_first_start_writes_the_same_cookie_twice(cluster, zk_client, tmp_path):
    """A new bookie writes one instance id to its data dir and to /cookies/{id}, and the
    registration carries it too."""
    data_dir = tmp_path / "new"
    proc = cluster.start_bookie(data_dir=data_dir)
    local = json.loads((data_dir / "cookie.json").read_text())
    remote = json.loads(zk_client.get(zkpaths.cookie(proc.address))[0])
    assert local["instance_id"] == remote["instance_id"]
    assert local["bookie_id"] == remote["bookie_id"] == proc.address
    registration = json.loads(zk_client.get(zkpaths.bookie(proc.address))[0])
    assert registration["instance_id"] == local["instance_id"]
    assert Bookie(proc).info()["instance_id"] == local["instance_id"]
    proc.restart()  # same data dir, same id: starts again
    assert Bookie(proc).info()["instance_id"] == local["instance_id"]


def test_wiped_data_dir_refuses_until_formatted(cluster, zk_client, tmp_path):
    """After the data dir is wiped the bookie refuses to start (exit 3, one line naming
    `quire bookie format`); format_bookie refuses while the bookie runs, and once run on a
    stopped bookie lets it start as a new, empty instance."""
    data_dir = tmp_path / "wiped"
    proc = cluster.start_bookie(data_dir=data_dir)
    bookie = Bookie(proc)
    bookie.add([sealed(1, 0)])
    old_instance = bookie.info()["instance_id"]

    with pytest.raises(BookieRunning):
        run_format(cluster, proc.address, data_dir)
    assert bookie.read(1, 0).payload == sealed(1, 0).payload  # nothing was touched

    proc.stop()
    shutil.rmtree(data_dir)
    message = refused(cluster, data_dir, proc.port)
    assert "wiped or replaced" in message
    assert "quire bookie format" in message and f"--bookie-id {proc.address}" in message
    assert f"--data-dir {data_dir}" in message
    assert not (data_dir / "bookie.db").exists()  # refused before touching anything

    run_format(cluster, proc.address, data_dir)
    assert not zk_client.exists(zkpaths.cookie(proc.address))
    again = cluster.start_bookie(data_dir=data_dir, port=proc.port)
    fresh = Bookie(again)
    assert fresh.info()["instance_id"] != old_instance
    assert fresh.ledgers() == []
    bookie.close()
    fresh.close()


def test_swapped_data_dirs_refuse(cluster, tmp_path):
    """A bookie started on another bookie's data dir refuses to start, and so does a bookie
    id whose ZooKeeper cookie is missing while its data dir has one."""
    dir_a, dir_b = tmp_path / "a", tmp_path / "b"
    a = cluster.start_bookie(data_dir=dir_a)
    b = cluster.start_bookie(data_dir=dir_b)
    Bookie(b).add([sealed(2, 0)])
    a.stop()
    b.stop()
    message = refused(cluster, dir_b, a.port)
    assert "swapped" in message and "quire bookie format" in message

    # A bookie id never seen before, on a used data dir: ZooKeeper has no cookie for it.
    message = refused(cluster, dir_b, free_port())
    assert "ZooKeeper has no cookie" in message and "quire bookie format" in message

    # The right pairs still start, with their data.
    b2 = cluster.start_bookie(data_dir=dir_b, port=b.port)
    assert Bookie(b2).read(2, 0).payload == sealed(2, 0).payload


def test_lost_zookeeper_cookie_refuses(cluster, zk_client, tmp_path):
    """If ZooKeeper lost the cookie (wrong root, wiped ensemble), the bookie refuses to start
    rather than register a new identity over existing data."""
    data_dir = tmp_path / "orphan"
    proc = cluster.start_bookie(data_dir=data_dir)
    proc.stop()
    zk_client.delete(zkpaths.cookie(proc.address))
    message = refused(cluster, data_dir, proc.port)
    assert "ZooKeeper has no cookie" in message


def test_store_without_any_cookie_refuses(cluster, tmp_path):
    """A data dir that holds a store but no cookie (cookie file deleted, ZooKeeper cookie
    gone) is not adopted silently."""
    data_dir = tmp_path / "nocookie"
    proc = cluster.start_bookie(data_dir=data_dir)
    Bookie(proc).add([sealed(1, 0)])
    proc.stop()
    assert json.loads((data_dir / "cookie.json").read_text())["bookie_id"] == proc.address
    (data_dir / "cookie.json").unlink()

    async def drop_zk_cookie():
        store = MetadataStore(cluster.zk_connect + cluster.zk_root, session_timeout_s=4)
        await store.start(10)
        await store.delete(zkpaths.cookie(proc.address))
        await store.stop()

    asyncio.run(drop_zk_cookie())
    message = refused(cluster, data_dir, proc.port)
    assert "holds a store but no cookie" in message


def test_two_bookies_cannot_share_a_data_dir(cluster, tmp_path):
    """A second process on a data dir in use refuses to start (exit 3)."""
    data_dir = tmp_path / "shared"
    cluster.start_bookie(data_dir=data_dir)
    message = refused(cluster, data_dir, free_port())
    assert "in use by another process" in message
