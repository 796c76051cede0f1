"""kazoo's connections give up on a server that no longer acknowledges what is sent
(services/zk/store.py ``dead_server_handler``): without it a client that keeps calling
never notices a server cut away by a partition."""

from __future__ import annotations

import socket

import pytest

from services.zk.store import MetadataStore, dead_server_handler

pytestmark = pytest.mark.skipif(
    not hasattr(socket, "TCP_USER_TIMEOUT"), reason="TCP_USER_TIMEOUT is Linux's"
)


def test_each_connection_gives_up_after_two_thirds_of_the_session_time_out() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        handler = dead_server_handler(4.0)
        sock = handler.create_connection(server.getsockname(), timeout=1.0)
        try:
            option = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
        finally:
            sock.close()
    assert option == 2666


def test_the_store_connects_through_that_handler() -> None:
    store = MetadataStore("127.0.0.1:1", session_timeout_s=6.0)
    with socket.create_server(("127.0.0.1", 0)) as server:
        sock = store.client.handler.create_connection(server.getsockname(), timeout=1.0)
        try:
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 4000
        finally:
            sock.close()
