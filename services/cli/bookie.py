"""``quire bookie format``: empty a bookie's data dir on purpose."""

from __future__ import annotations

import asyncio
import inspect
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from services.cli.common import check_zk, fail

if TYPE_CHECKING:
    from services.zk.auth import ZkCredentials

_HOSTPORT = re.compile(r"^[A-Za-z0-9.\-\[\]:]+:\d{1,5}$")

bookie_app = typer.Typer(
    help="Bookie maintenance.", no_args_is_help=True, pretty_exceptions_enable=False
)


@bookie_app.command("format")
def bookie_format(
    data_dir: Annotated[
        Path, typer.Option(show_default=False, help="the bookie's data dir (erased)")
    ],
    bookie_id: Annotated[
        str, typer.Option(show_default=False, help="the bookie's id: its advertised HOST:PORT")
    ],
    zk: Annotated[
        str, typer.Option(envvar="QUIRE_ZK", help="ZooKeeper connection string")
    ] = "127.0.0.1:2181",
    zk_root: Annotated[str, typer.Option(envvar="QUIRE_ZK_ROOT", help="ZooKeeper chroot")] = (
        "/quire"
    ),
    zk_auth_file: Annotated[
        Path | None,
        typer.Option(
            envvar="QUIRE_ZK_AUTH_FILE",
            show_default=False,
            help="file of the cluster's ZooKeeper credentials USER:PASSWORD (or the "
            "variable QUIRE_ZK_AUTH)",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="do not ask for confirmation")] = False,
) -> None:
    """Erase a bookie's data dir and give it a new identity (cookie), so it can start again.

    A bookie refuses to start when its data dir does not match the cookie in
    ZooKeeper (the dir was wiped, swapped or restored). Formatting says "this
    bookie starts empty, on purpose": every entry it held is gone, and the
    cluster re-replicates what it needs. The bookie must be stopped.
    """
    if not _HOSTPORT.match(bookie_id):
        raise typer.BadParameter(f"must be HOST:PORT, got {bookie_id!r}", param_hint="--bookie-id")
    credentials = check_zk(zk, zk_root, auth_file=zk_auth_file)
    where = f"{zk}{'' if zk_root == '/' else zk_root}"
    if not force:
        if not sys.stdin.isatty():
            fail(
                f"refusing to format bookie {bookie_id} without --force: "
                "stdin is not a terminal, so nobody can confirm"
            )
        confirmed = typer.confirm(
            f"Erase everything in {data_dir} and give bookie {bookie_id} a new cookie "
            f"in ZooKeeper {where}?",
            default=False,
        )
        if not confirmed:
            fail("not confirmed; nothing changed")
    try:
        result = asyncio.run(_format(bookie_id, data_dir, where, credentials))
    except Exception as exc:  # noqa: BLE001 - reported in one line
        from services.errors import QuireError

        if isinstance(exc, QuireError):
            fail(exc.message)
        raise
    detail = f" ({result})" if isinstance(result, str | dict) and result else ""
    print(
        f"formatted bookie {bookie_id}: data dir {data_dir} is empty{detail}; "
        "its next start gives it a new cookie"
    )


async def _format(
    bookie_id: str, data_dir: Path, zk_hosts: str, credentials: ZkCredentials | None
) -> object:
    from services.zk.store import MetadataStore

    try:
        from bookie.cookie import format_bookie
    except ImportError:
        fail("the bookie is not installed here (no bookie.cookie module)")
    store = MetadataStore(zk_hosts, credentials=credentials)
    try:  # a start refused by ZooKeeper leaves a client to stop too
        await store.start(timeout_s=15.0)
        # format_bookie refuses while the bookie is registered or holds its data dir.
        result = format_bookie(store, bookie_id, data_dir)
        if inspect.isawaitable(result):
            result = await result
        return result
    finally:
        await store.stop()
