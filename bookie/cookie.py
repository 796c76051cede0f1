"""The cookie: a bookie's identity, bound to its data dir.

A bookie's id is its advertised ``host:port``. Its cookie is an
``instance_id`` written twice: in the data dir (``cookie.json``) and in
ZooKeeper (``/cookies/{id}``). At start:

- both absent: a new bookie. The data dir must hold no store; a new
  ``instance_id`` is written to both (data dir first as ``cookie.json.new``,
  then ZooKeeper, then the rename, so a crash in between is finished on the
  next start rather than refused);
- both present with the same ``instance_id``: start;
- anything else refuses to start (``CookieMismatch``): the data dir was wiped
  or swapped, or ZooKeeper lost the cookie. Serving as an empty bookie under
  an old identity would silently lose the entries the cluster believes this
  bookie holds. The message says what happened and how to format the bookie
  explicitly, which forgets its data (the cluster re-replicates it).

``format_bookie`` is that explicit format: it wipes the data dir's contents
and deletes the ZooKeeper cookie, and refuses while the bookie is running.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from bookie.storage import data_dir_locked_elsewhere, has_store
from services.errors import BookieRunning, CookieMismatch, NodeExists, NodeNotFound, present
from services.zk import paths as zkpaths
from services.zk.store import MetadataStore

COOKIE_FILE = "cookie.json"
PENDING_FILE = "cookie.json.new"


def _format_hint(bookie_id: str, data_dir: Path, zk: str, zk_root: str) -> str:
    return (
        f"quire bookie format --zk {zk} --zk-root {zk_root} --data-dir {data_dir} "
        f"--bookie-id {bookie_id}"
    )


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CookieMismatch(f"cookie file {path} is unreadable ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("instance_id"), str):
        raise CookieMismatch(f"cookie file {path} does not hold an instance_id")
    return data


def _write_durably(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


async def _zk_cookie(store: MetadataStore, bookie_id: str) -> dict[str, Any] | None:
    found = await store.get_or_none(zkpaths.cookie(bookie_id))
    if found is None:
        return None
    try:
        data = json.loads(found.data)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("instance_id"), str):
        raise CookieMismatch(f"ZooKeeper cookie {zkpaths.cookie(bookie_id)} is malformed")
    return data


async def check_cookie(
    store: MetadataStore, bookie_id: str, data_dir: Path, zk: str = "", zk_root: str = ""
) -> str:
    """Verify (or create) the bookie's cookie; return its ``instance_id``.

    Raises ``CookieMismatch`` with a one-line explanation and the format command
    when the data dir and ZooKeeper disagree.
    """
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    hint = _format_hint(bookie_id, data_dir, zk or store.hosts.split("/", 1)[0], zk_root or "/")
    zk_cookie = await _zk_cookie(store, bookie_id)
    local = _read_json(data_dir / COOKIE_FILE)
    pending = _read_json(data_dir / PENDING_FILE) if local is None else None

    if local is None and pending is not None:
        # A previous start crashed while creating the cookie: finish it.
        if zk_cookie is None:
            await _create_zk_cookie(store, bookie_id, pending)
            zk_cookie = pending
        if zk_cookie["instance_id"] == pending["instance_id"]:
            os.replace(data_dir / PENDING_FILE, data_dir / COOKIE_FILE)
            _fsync_dir(data_dir)
            return str(pending["instance_id"])

    if local is None and zk_cookie is None:
        if has_store(data_dir):
            raise CookieMismatch(
                f"bookie {bookie_id}: data dir {data_dir} holds a store but no cookie, and "
                f"ZooKeeper has no cookie for {bookie_id}: refusing to adopt unknown data; "
                f"to start afresh, empty it with: {hint} (its data is lost)"
            )
        cookie = {
            "bookie_id": bookie_id,
            "instance_id": uuid.uuid4().hex,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        _write_durably(data_dir / PENDING_FILE, cookie)
        await _create_zk_cookie(store, bookie_id, cookie)
        os.replace(data_dir / PENDING_FILE, data_dir / COOKIE_FILE)
        _fsync_dir(data_dir)
        return str(cookie["instance_id"])

    if local is None:
        found = present(zk_cookie, "no local cookie and none in ZooKeeper: handled above")
        raise CookieMismatch(
            f"bookie {bookie_id}: data dir {data_dir} has no cookie but ZooKeeper holds "
            f"cookie {found['instance_id']} for this bookie: the data dir was wiped or "
            f"replaced; to start it empty, run: {hint} (its data is lost and will be "
            f"re-replicated)"
        )
    if zk_cookie is None:
        raise CookieMismatch(
            f"bookie {bookie_id}: data dir {data_dir} has cookie {local['instance_id']} "
            f"(bookie {local.get('bookie_id')}) but ZooKeeper has no cookie for "
            f"{bookie_id}: wrong --zk/--zk-root, ZooKeeper lost its data, or the data dir "
            f"belongs to another bookie; to reuse it empty, run: {hint} (its data is lost)"
        )
    if local["instance_id"] != zk_cookie["instance_id"] or local.get("bookie_id") not in (
        None,
        bookie_id,
    ):
        raise CookieMismatch(
            f"bookie {bookie_id}: data dir {data_dir} holds cookie {local['instance_id']} "
            f"of bookie {local.get('bookie_id')} but ZooKeeper expects "
            f"{zk_cookie['instance_id']}: the data dir was swapped with another one; "
            f"put the right one back, or run: {hint} (its data is lost and will be "
            f"re-replicated)"
        )
    return str(local["instance_id"])


async def _create_zk_cookie(store: MetadataStore, bookie_id: str, cookie: dict[str, Any]) -> None:
    try:
        await store.create(zkpaths.cookie(bookie_id), json.dumps(cookie).encode())
    except NodeExists as exc:
        raise CookieMismatch(
            f"bookie {bookie_id}: another process created its ZooKeeper cookie at the "
            f"same time; is a second bookie starting with the same id?"
        ) from exc


async def format_bookie(store: MetadataStore, bookie_id: str, data_dir: Path) -> None:
    """Forget a bookie's data: empty its data dir and delete its ZooKeeper cookie.

    Refuses (``BookieRunning``) while ``/bookies/{id}`` exists or another
    process holds the data dir. The next start creates a new cookie and the
    bookie joins as an empty one; the cluster re-replicates what it held.
    """
    data_dir = Path(data_dir)
    if await store.exists(zkpaths.bookie(bookie_id)):
        raise BookieRunning(
            f"bookie {bookie_id} is registered in ZooKeeper: stop it before formatting "
            f"(after a crash, wait for its session to expire)"
        )
    if data_dir_locked_elsewhere(data_dir):
        raise BookieRunning(f"data dir {data_dir} is in use by a running bookie: stop it first")
    if data_dir.exists():
        for child in data_dir.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        _fsync_dir(data_dir)
    else:
        data_dir.mkdir(parents=True)
    try:
        await store.delete(zkpaths.cookie(bookie_id))
    except NodeNotFound:
        pass
