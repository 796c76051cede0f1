"""The multi-host harness itself (tests/multihost/network.py): hosts reach each other
by name, partitions drop exactly the packets they name until healed, and nothing the
harness made outlives it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.harness import wait_for
from tests.multihost.conftest import require_namespaces
from tests.multihost.network import (
    NETNS_ETC_DIR,
    Host,
    Network,
    namespaces,
    owner_pid,
    run,
    sweep,
)

PORT = 7000
BLOCKED_CONNECT_S = 0.5
DATAGRAM_BYTES_MAX = 64


@pytest.fixture(scope="module")
def pair(network: Network) -> tuple[Host, Host]:
    return network.add_host("alpha"), network.add_host("beta")


@pytest.fixture
def listening(pair: tuple[Host, Host]) -> Iterator[None]:
    """A TCP listener on each host's address, accepting (and closing) every connection."""
    listeners = []
    for host in pair:
        server = host.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((host.address, PORT))
        server.listen(16)
        listeners.append(server)
        threading.Thread(target=_accept_all, args=(server,), daemon=True).start()
    yield
    for server in listeners:
        server.close()


def _accept_all(server: socket.socket) -> None:
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        conn.close()


def connects(source: Host, target: Host, timeout_s: float = BLOCKED_CONNECT_S) -> bool:
    """Whether a TCP connection from ``source`` to ``target``'s listener is set up."""
    sock = source.socket()
    sock.settimeout(timeout_s)
    try:
        sock.connect((target.address, PORT))
    except OSError:
        return False
    finally:
        sock.close()
    return True


def test_hosts_reach_each_other_by_name(pair: tuple[Host, Host], tmp_path: Path) -> None:
    """A process in one host connects to another host by its name (its hosts file) and
    comes from its own address; the root namespace has no route to the subnet."""
    alpha, beta = pair
    server = beta.socket()
    server.bind((beta.address, PORT + 1))
    server.listen(1)
    server.settimeout(10.0)
    code = "import socket; socket.create_connection(('beta', %d), timeout=5).sendall(b'hi')"
    client = alpha.spawn("client", [sys.executable, "-c", code % (PORT + 1)], tmp_path / "c.log")
    try:
        conn, (peer, _) = server.accept()
        with conn:
            assert conn.recv(2) == b"hi"
        assert peer == alpha.address
        assert client.proc is not None and client.proc.wait(10.0) == 0
    finally:
        server.close()
    resolved = subprocess.run(
        alpha.command(["getent", "hosts", "beta"]), capture_output=True, text=True, check=True
    )
    assert resolved.stdout.split() == [beta.address, "beta"]
    assert "10.213." not in run(["ip", "route", "show"])


def test_a_partition_both_ways_blocks_tcp_both_ways_until_healed(
    network: Network, pair: tuple[Host, Host], listening: None
) -> None:
    """partition(a, b) drops every packet between the two sets: no TCP connection is
    set up either way; heal() restores both directions and removes every rule."""
    alpha, beta = pair
    assert connects(alpha, beta) and connects(beta, alpha)
    before = {h.name: h.iptables("-S") for h in pair}
    network.partition([alpha], [beta])
    try:
        assert not connects(alpha, beta)
        assert not connects(beta, alpha)
    finally:
        network.heal()
    assert connects(alpha, beta, 5.0) and connects(beta, alpha, 5.0)
    assert {h.name: h.iptables("-S") for h in pair} == before


def test_a_one_way_partition_drops_exactly_one_direction(
    network: Network, pair: tuple[Host, Host]
) -> None:
    """partition(a, b, one_way=True) drops what a sends to b and nothing b sends to a:
    a datagram from alpha sent during the partition never arrives (the first one beta
    gets is the one sent after heal), while beta's datagrams reach alpha throughout."""
    alpha, beta = pair
    inbox = {}
    for host in pair:
        sock = host.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((host.address, PORT + 2))
        sock.settimeout(5.0)
        inbox[host.name] = sock
    try:
        network.partition([alpha], [beta], one_way=True)
        try:
            inbox["alpha"].sendto(b"lost", (beta.address, PORT + 2))
            inbox["beta"].sendto(b"during", (alpha.address, PORT + 2))
            assert inbox["alpha"].recvfrom(DATAGRAM_BYTES_MAX) == (
                b"during",
                (beta.address, PORT + 2),
            )
        finally:
            network.heal()
        inbox["alpha"].sendto(b"healed", (beta.address, PORT + 2))
        assert inbox["beta"].recvfrom(DATAGRAM_BYTES_MAX)[0] == b"healed"
    finally:
        for sock in inbox.values():
            sock.close()


def test_close_removes_every_namespace_link_rule_and_process(tmp_path: Path) -> None:
    """Everything a network made goes with close: its processes (by pid), namespaces
    (with the bridge, the veths and the rules inside them) and /etc/netns directories;
    the root namespace's links are as they were."""
    require_namespaces()
    root_links = _root_links()
    net = Network()
    a, b = net.add_hosts(["one", "two"])
    net.partition([a], [b])
    sleeper = a.spawn("sleeper", ["sleep", "600"], tmp_path / "sleep.log")
    assert sleeper.pid is not None
    pid = sleeper.pid
    assert _root_links() == root_links, "the root namespace got links"
    assert sorted(ns for ns in namespaces() if ns.startswith(net.prefix + "-")) == sorted(
        [net.switch, a.namespace, b.namespace]
    )
    net.close()
    assert [ns for ns in namespaces() if ns.startswith(net.prefix)] == []
    assert [p.name for p in NETNS_ETC_DIR.glob(net.prefix + "-*")] == []
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert _root_links() == root_links
    net.close()  # a second close does nothing


def _root_links() -> set[str]:
    return {line.split(":")[1].strip() for line in run(["ip", "-o", "link", "show"]).splitlines()}


def test_the_sweeper_removes_what_dead_owners_left_and_nothing_of_live_ones() -> None:
    """sweep() deletes the namespaces and /etc/netns directories named after a pid that
    no longer runs, and keeps those of a live pid (this process's)."""
    require_namespaces()
    dead = _a_dead_pid()
    leftover = f"qh{dead}n1-gone"
    kept = f"qh{os.getpid()}n999-kept"
    assert owner_pid(leftover) == dead and owner_pid("qhx-other") is None
    for ns in (leftover, kept):
        run(["ip", "netns", "add", ns])
        (NETNS_ETC_DIR / ns).mkdir(parents=True, exist_ok=True)
    try:
        assert leftover in sweep()
        assert leftover not in namespaces() and not (NETNS_ETC_DIR / leftover).exists()
        assert kept in namespaces() and (NETNS_ETC_DIR / kept).exists()
    finally:
        for ns in (leftover, kept):
            if ns in namespaces():
                run(["ip", "netns", "del", ns])
            shutil.rmtree(NETNS_ETC_DIR / ns, ignore_errors=True)


def _a_dead_pid() -> int:
    """The pid of a child that has ended (and been reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    wait_for(lambda: not psutil.pid_exists(child.pid), 5.0, "the child's pid to be free")
    return child.pid
