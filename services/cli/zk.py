"""``quire zk lock`` and ``quire zk unlock``: the ACLs of a cluster's znodes.

Services given ZooKeeper credentials lock what they create; these commands set the ACL
of what exists already, the chroot and everything below it (``services/zk/acls.py``):
to the cluster's principal alone, or back to ZooKeeper's open ACL
(docs/security.md, "ZooKeeper authentication").
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from services.cli.common import check_zk, fail

if TYPE_CHECKING:
    from kazoo.security import ACL

    from services.zk.auth import ZkCredentials

zk_app = typer.Typer(
    help="ZooKeeper maintenance: lock a cluster's znodes to its principal, or open them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

Zk = Annotated[str, typer.Option(envvar="QUIRE_ZK", help="ZooKeeper connection string")]
ZkRoot = Annotated[str, typer.Option(envvar="QUIRE_ZK_ROOT", help="ZooKeeper chroot")]
ZkAuthFile = Annotated[
    Path | None,
    typer.Option(
        envvar="QUIRE_ZK_AUTH_FILE",
        show_default=False,
        help="file of the cluster's ZooKeeper credentials USER:PASSWORD (or the variable "
        "QUIRE_ZK_AUTH)",
    ),
]


@zk_app.command("lock")
def lock(
    zk: Zk = "127.0.0.1:2181", zk_root: ZkRoot = "/quire", zk_auth_file: ZkAuthFile = None
) -> None:
    """Lock the chroot and every znode below it to the principal of the credentials.

    Each gets the ACL the services give what they create: all rights to that principal,
    none to anyone else. Restart every service with the same credentials first, so that
    what they create from then on is locked too; one still without them is refused.
    """
    credentials = _credentials(zk, zk_root, zk_auth_file)
    count = _apply(zk, zk_root, credentials, credentials.acl())
    print(f"locked {count} znodes under {zk_root} to {credentials.principal}")


@zk_app.command("unlock")
def unlock(
    zk: Zk = "127.0.0.1:2181", zk_root: ZkRoot = "/quire", zk_auth_file: ZkAuthFile = None
) -> None:
    """Open the chroot and every znode below it to anyone again (ZooKeeper's open ACL).

    Needs the credentials that locked them; for going back to services without
    credentials.
    """
    from kazoo.security import OPEN_ACL_UNSAFE

    credentials = _credentials(zk, zk_root, zk_auth_file)
    count = _apply(zk, zk_root, credentials, OPEN_ACL_UNSAFE)
    print(f"opened {count} znodes under {zk_root} to anyone")


def _credentials(zk: str, zk_root: str, auth_file: Path | None) -> ZkCredentials:
    credentials = check_zk(zk, zk_root, auth_file=auth_file)
    if credentials is None:
        fail("needs the cluster's ZooKeeper credentials: --zk-auth-file or QUIRE_ZK_AUTH")
    if zk_root == "/":
        fail(
            "--zk-root /: ZooKeeper's own root is not the cluster's to lock; "
            "run the cluster under a chroot of its own"
        )
    return credentials


def _apply(zk: str, zk_root: str, credentials: ZkCredentials, acl: Sequence[ACL]) -> int:
    from services.errors import QuireError

    try:
        return asyncio.run(_set(f"{zk}{zk_root}", credentials, acl))
    except QuireError as exc:
        fail(exc.message)


async def _set(hosts: str, credentials: ZkCredentials, acl: Sequence[ACL]) -> int:
    from services.zk.acls import set_tree_acl
    from services.zk.store import MetadataStore

    store = MetadataStore(hosts, credentials=credentials)
    try:  # a start refused by ZooKeeper leaves a client to stop too
        await store.start(timeout_s=15.0)
        return await set_tree_acl(store, "/", acl)
    finally:
        await store.stop()
