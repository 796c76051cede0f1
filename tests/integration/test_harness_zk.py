"""The harness's ZooKeeper session expiry (tests/harness.py ``expire_session``), against
a real server: it must end the session every time, also when the owner reconnects as
eagerly as the services' stores do (kazoo retrying every 0.1 s)."""

from __future__ import annotations

import threading

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from services.cluster.processes import ZooKeeperProcess
from tests.harness import expire_session

ROUNDS = 20


def test_expire_session_ends_the_session_every_time(
    zookeeper: ZooKeeperProcess, zk_root: str, zk_client: KazooClient
) -> None:
    """Twenty expiries in a row: each time the owner hears LOST, comes back with a new
    session, and its ephemeral node is gone. kazoo's harness trick (a second client
    started on the session, then stopped) let the owner take the session back before
    the close on a loaded machine: the old session, and its node, lived on. (``zk_client``
    creates the chroot.)"""
    owner = KazooClient(
        hosts=zookeeper.connect_string + zk_root,
        timeout=4.0,
        connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
    )
    lost = threading.Event()
    back = threading.Event()

    def on_state(state: str) -> None:
        if state == KazooState.LOST:
            lost.set()
        elif state == KazooState.CONNECTED and lost.is_set():
            back.set()

    owner.add_listener(on_state)
    owner.start(10.0)
    try:
        owner.ensure_path("/owned")
        for round_ in range(ROUNDS):
            lost.clear()
            back.clear()
            owner.create(f"/owned/{round_}", ephemeral=True)
            session_id, password = owner.client_id
            expire_session(zookeeper.connect_string, session_id, password)
            assert back.wait(20), f"round {round_}: the owner did not get a new session"
            assert owner.client_id[0] != session_id, round_
            assert owner.get_children("/owned") == [], round_
    finally:
        owner.stop()
        owner.close()
