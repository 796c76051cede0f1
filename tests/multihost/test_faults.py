"""The harness's disks (tests/multihost/faults.py): a tmpfs is mounted for a network and
unmounted when the network closes, even with a file still open on it, and one left by a
dead test process is swept, never one of a live process."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import psutil

from tests.harness import wait_for
from tests.multihost.conftest import require_namespaces
from tests.multihost.faults import mount_tmpfs, mounts, sweep_mounts, unmount
from tests.multihost.network import Network, run

DISK_BYTES = 4 * 1024 * 1024


def mounted(path: Path) -> bool:
    return any(target == path for _, target, _ in mounts())


def test_a_tmpfs_has_its_size_and_goes_with_its_network(tmp_path: Path) -> None:
    """A disk of 4 MiB is 4 MiB, and closing its network unmounts it although a file on
    it is still open (lazily then)."""
    require_namespaces()
    with Network() as net:
        disk = mount_tmpfs(net, "probe", tmp_path / "disk", DISK_BYTES)
        stat = os.statvfs(disk)
        assert stat.f_blocks * stat.f_frsize == DISK_BYTES
        held = open(disk / "held", "wb")  # a file still open when the network closes
    try:
        assert not mounted(disk)
    finally:
        held.close()


def test_the_sweeper_unmounts_what_dead_owners_left_and_nothing_of_live_ones(
    tmp_path: Path,
) -> None:
    """sweep_mounts() unmounts a tmpfs named after a pid that no longer runs and keeps
    one named after a live pid (this process's)."""
    require_namespaces()
    child = subprocess.Popen(["true"])
    child.wait()
    wait_for(lambda: not psutil.pid_exists(child.pid), 5.0, "the child's pid to be free")
    left, kept = tmp_path / "left", tmp_path / "kept"
    for path, owner in ((left, child.pid), (kept, os.getpid())):
        path.mkdir()
        run(["mount", "-t", "tmpfs", "-o", "size=1m", f"qh{owner}n999-probe", str(path)])
    try:
        assert left in sweep_mounts()
        assert not mounted(left) and mounted(kept)
    finally:
        unmount(left)
        unmount(kept)
