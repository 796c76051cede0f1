"""Faults of a bookie's disk and identity, beside the network's (tests/multihost/network.py
``partition`` and ``heal``) and the processes' own (a ``HostService`` is killed, paused,
resumed and restarted by pid).

- A small disk: ``mount_tmpfs`` puts a directory on a tmpfs of a given size, unmounted
  when the network closes (after its processes stopped), whatever happened.
  ``start_layout(..., bookie_disk_bytes=N)`` gives each bookie one, holding its data dir.
- ``fill_disk`` / ``free_disk``: a ballast file beside the data dir takes the disk's free
  space down to what is asked (all of it by default); deleting it gives it back.
- ``wipe``: the bookie's disk is lost and it comes back as a new instance under the same
  id, as an operator does it: kill it, empty its data dir (``lose_disk``), then
  ``quire bookie format`` (which deletes its cookie from ZooKeeper once its old
  registration expired) and start it (``format_and_start``); the bookie then has a new
  instance id and holds nothing.

A tmpfs's source is named after the network's prefix (``qh<pid>n<seq>-<host>``), like its
namespaces, so ``sweep_mounts`` removes what a killed test process left, and never
anything of a live one.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from tests.multihost.network import Network, NetworkError, owner_pid, run

if TYPE_CHECKING:
    from tests.multihost.layout import HostService, Layout

BALLAST = "ballast"
# What fill_disk leaves when the bookie took pages between the measure and the fill.
BALLAST_SLACK_BLOCKS = 16
FILL_ATTEMPTS = 20
FORMAT_TIMEOUT_S = 60.0
FORMAT_RETRY_S = 0.5


def mounts() -> list[tuple[str, Path, str]]:
    """(source, mount point, type) of every mount of this mount namespace."""
    found = []
    with open("/proc/self/mounts") as f:
        for line in f:
            source, target, kind, *_ = line.split()
            found.append((source, Path(target.replace("\\040", " ")), kind))
    return found


def sweep_mounts() -> list[Path]:
    """Unmount the tmpfs disks that networks of dead processes left; returns them."""
    removed = []
    for source, target, kind in mounts():
        pid = owner_pid(source)
        if kind == "tmpfs" and pid is not None and not psutil.pid_exists(pid):
            with contextlib.suppress(NetworkError):
                run(["umount", "--lazy", str(target)])
                removed.append(target)
    return removed


def mount_tmpfs(network: Network, name: str, path: Path, size_bytes: int) -> Path:
    """A tmpfs of ``size_bytes`` at ``path`` (made if missing), named after the network
    and ``name``; unmounted when the network closes."""
    sweep_mounts()
    path.mkdir(parents=True, exist_ok=True)
    source = f"{network.prefix}-{name}"
    run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0755", source, str(path)])
    network.at_close(lambda: unmount(path))
    return path


def unmount(path: Path) -> None:
    """Unmount ``path``; lazily if something still holds it open (a process of the
    network that outlived its stop), so no mount is ever left behind."""
    if not os.path.ismount(path):
        return
    try:
        run(["umount", str(path)])
    except NetworkError:
        run(["umount", "--lazy", str(path)])


def disk_of(layout: Layout, bookie: HostService) -> Path:
    """The tmpfs holding ``bookie``'s data dir (``start_layout(bookie_disk_bytes=...)``)."""
    disk = layout.data_dirs[bookie.address].parent
    if not os.path.ismount(disk):
        raise NetworkError(f"{bookie.name} has no disk of its own: bookie_disk_bytes is unset")
    return disk


def fill_disk(layout: Layout, bookie: HostService, leave_bytes: int = 0) -> int:
    """Take the free space of ``bookie``'s disk down to about ``leave_bytes`` with a
    ballast file beside its data dir (grown if there already); returns the bytes added.
    A bookie writing meanwhile can take pages between the look at the free space and the
    allocation, which then fails whole (tmpfs gives a failed allocation back): look
    again and leave a few more blocks each time, never a fixed share of the disk."""
    disk = disk_of(layout, bookie)
    with open(disk / BALLAST, "ab") as f:
        start = f.seek(0, os.SEEK_END)
        for attempt in range(FILL_ATTEMPTS):
            stat = os.statvfs(disk)
            block = stat.f_frsize
            slack = attempt * BALLAST_SLACK_BLOCKS * block
            want = max(0, stat.f_bavail * block - leave_bytes - slack) // block * block
            if want == 0:
                return 0
            try:
                os.posix_fallocate(f.fileno(), start, want)
                return want
            except OSError:
                continue
    raise NetworkError(f"{bookie.name}: its disk could not be filled in {FILL_ATTEMPTS} tries")


def free_disk(layout: Layout, bookie: HostService) -> None:
    """Delete the ballast of ``fill_disk``: its space is free again."""
    (disk_of(layout, bookie) / BALLAST).unlink(missing_ok=True)


def wipe(layout: Layout, bookie: HostService) -> None:
    """``bookie`` loses its disk and comes back empty under the same id, as a new
    instance: ``lose_disk``, then ``format_and_start``."""
    lose_disk(layout, bookie)
    format_and_start(layout, bookie)


def lose_disk(layout: Layout, bookie: HostService) -> None:
    """SIGKILL ``bookie`` and empty its data dir: what it stored is gone."""
    bookie.kill()
    data_dir = layout.data_dirs[bookie.address]
    for child in data_dir.iterdir():
        if child.is_dir() and not child.is_symlink():
            run(["rm", "-rf", "--one-file-system", str(child)])
        else:
            child.unlink()


def format_and_start(layout: Layout, bookie: HostService) -> None:
    """``quire bookie format --force`` run inside the killed ``bookie``'s host (retried
    while ZooKeeper still holds its old registration: the format refuses until that
    session expired), then the bookie started, a new instance, and healthy again."""
    data_dir = layout.data_dirs[bookie.address]
    argv = [
        sys.executable, "-m", "services.cli", "bookie", "format", "--force",
        "--data-dir", str(data_dir), "--bookie-id", bookie.address,
        "--zk", layout.zk_connect, "--zk-root", layout.zk_root,
    ]  # fmt: skip
    deadline = time.monotonic() + FORMAT_TIMEOUT_S
    while True:
        done = subprocess.run(
            bookie.node.command(argv),
            capture_output=True,
            text=True,
            timeout=FORMAT_TIMEOUT_S,
            check=False,
        )
        if done.returncode == 0:
            break
        if "registered" not in done.stdout + done.stderr or time.monotonic() > deadline:
            raise NetworkError(f"quire bookie format failed: {done.stdout}{done.stderr}")
        time.sleep(FORMAT_RETRY_S)
    bookie.start()
    bookie.wait_healthy()
