"""The ``quire`` command line.

Global options come before the subcommand: ``--gateway URL`` (env
``QUIRE_GATEWAY``, default ``http://127.0.0.1:8080``) and ``--token`` (env
``QUIRE_TOKEN``); a flag wins over its variable. Commands that talk to a
gateway read them with ``global_options(ctx)`` (``services/cli_common.py``,
which sub-apps import, so there is no import cycle).

Commands: ``quire up`` (a local cluster, ``services/cluster.py``), ``quire
ledger ...`` (``services/cli_ledger.py``), ``quire bench``
(``services/bench.py``) and ``quire bookie format``. The log and admin
commands come with the issues that build them.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from services.cli_common import (  # noqa: F401 - global_options re-exported
    DEFAULT_GATEWAY,
    GlobalOptions,
    fail,
    global_options,
)

if TYPE_CHECKING:
    from services.cluster import ClusterError, LocalCluster

_HOSTPORT = re.compile(r"^[A-Za-z0-9.\-\[\]:]+:\d{1,5}$")

app = typer.Typer(
    name="quire",
    help="Quire: a replicated, durable log store (the BookKeeper ledger protocol over HTTP).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
bookie_app = typer.Typer(
    help="Bookie maintenance.", no_args_is_help=True, pretty_exceptions_enable=False
)
app.add_typer(bookie_app, name="bookie")


@app.callback()
def _global(
    ctx: typer.Context,
    gateway: Annotated[
        str,
        typer.Option(
            envvar="QUIRE_GATEWAY", help="URL of the gateway the ledger and log commands talk to"
        ),
    ] = DEFAULT_GATEWAY,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="QUIRE_TOKEN", show_default=False, help="API (or admin) token for the gateway"
        ),
    ] = None,
) -> None:
    if not re.match(r"^https?://[^/\s]+", gateway):
        raise typer.BadParameter(f"must be an http:// or https:// URL, got {gateway!r}")
    ctx.obj = GlobalOptions(gateway.rstrip("/"), token or None)


def _check_zk(zk: str | None, zk_root: str, session_timeout: float | None = None) -> None:
    """Refuse impossible ZooKeeper options with the same rules the services apply."""
    from pydantic import ValidationError

    from services.settings import CommonSettings

    values: dict = {"zk_root": zk_root}
    if zk is not None:
        values["zk"] = zk
    if session_timeout is not None:
        values["zk_session_timeout"] = session_timeout
    try:
        CommonSettings.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "--" + "-".join(str(p) for p in first.get("loc", ())).replace("_", "-")
        msg = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
        raise typer.BadParameter(f"{where}: {msg}") from None


# -- quire up ---------------------------------------------------------------


@app.command()
def up(
    bookies: Annotated[int, typer.Option(min=1, max=32, help="number of bookies")] = 3,
    data_dir: Annotated[
        Path, typer.Option(help="where ZooKeeper, the bookies and the logs keep their files")
    ] = Path("./quire-data"),
    gateway_port: Annotated[
        int,
        typer.Option(
            min=1,
            max=65535,
            help="P: gateway on P, bookies on P+1..P+N, auditor P+N+1, replicator P+N+2",
        ),
    ] = 8080,
    zk: Annotated[
        str | None,
        typer.Option(
            show_default=False,
            help="use this ZooKeeper (HOST:PORT[,...]) instead of starting one",
        ),
    ] = None,
    zk_root: Annotated[str, typer.Option(help="ZooKeeper chroot of the cluster")] = "/quire",
    zk_session_timeout: Annotated[
        float | None,
        typer.Option(show_default=False, help="ZooKeeper session timeout, seconds [default: 10]"),
    ] = None,
    without: Annotated[
        list[str] | None,
        typer.Option(
            show_default=False,
            help="do not start this service (gateway, auditor or replicator); repeatable",
        ),
    ] = None,
    zk_port: Annotated[
        int, typer.Option(min=1, max=65535, hidden=True, help="port of the ZooKeeper it starts")
    ] = 2181,
    start_timeout: Annotated[
        float, typer.Option(min=1.0, hidden=True, help="seconds each process has to get ready")
    ] = 90.0,
) -> None:
    """Run a local cluster: ZooKeeper (unless --zk) and the bookies, until Ctrl-C or SIGTERM.

    Prints each process's URL, pid and log (logs are in DATA_DIR/logs/), then
    keeps running. Ctrl-C or SIGTERM stops everything and exits 0. The data
    dir is reused by the next start (use the same --gateway-port: a bookie's
    identity is its host:port). A child that dies is reported and the rest keep
    running; if ZooKeeper dies, or no service is left, quire up stops and exits 1.
    """
    from services.cluster import SERVICES, ClusterError, LocalCluster, StopRequested, UpConfig

    _check_zk(zk, zk_root, zk_session_timeout)
    names = [spec.name for spec in SERVICES]
    for name in without or ():
        if name not in names:
            raise typer.BadParameter(f"must be one of {', '.join(names)}", param_hint="--without")
    cluster = LocalCluster(
        UpConfig(
            data_dir=data_dir,
            bookies=bookies,
            gateway_port=gateway_port,
            zk=zk,
            zk_port=zk_port,
            zk_root=zk_root,
            zk_session_timeout=zk_session_timeout,
            start_deadline_s=start_timeout,
            without=frozenset(without or ()),
        )
    )

    def on_signal(signum: int, _frame: object) -> None:
        if not cluster.stop_requested.is_set():
            cluster.ui.note(f"quire up: {signal.Signals(signum).name}: stopping everything")
        cluster.stop_requested.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    failure: ClusterError | None = None
    try:
        with cluster:  # stops every process it started, whatever happens
            try:
                cluster.start()
                cluster.ui.started(cluster.summary())
                cluster.supervise()
            except StopRequested:
                pass
            except ClusterError as exc:
                failure = exc
                _report(cluster, exc)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if failure is not None:
        raise typer.Exit(1)
    cluster.ui.started("quire up: stopped everything")


def _report(cluster: LocalCluster, exc: ClusterError) -> None:
    """The error in one line, then the end of the log that explains it, if any."""
    from services.processes import tail

    cluster.ui.error(str(exc))
    if exc.log_path is not None:
        lines = tail(exc.log_path, 12).splitlines()
        cluster.ui.note("\n".join(f"    {line}" for line in lines))


# -- quire bookie format ----------------------------------------------------


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
    _check_zk(zk, zk_root)
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
        result = asyncio.run(_format(bookie_id, data_dir, where))
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


async def _format(bookie_id: str, data_dir: Path, zk_hosts: str) -> object:
    from services.metadata import MetadataStore

    try:
        from bookie.cookie import format_bookie
    except ImportError:
        fail("the bookie is not installed here (no bookie.cookie module)")
    store = MetadataStore(zk_hosts)
    await store.start(timeout_s=15.0)
    try:
        # format_bookie refuses while the bookie is registered or holds its data dir.
        result = format_bookie(store, bookie_id, data_dir)
        if inspect.isawaitable(result):
            result = await result
        return result
    finally:
        await store.stop()


# -- sub-apps ----------------------------------------------------------------

from services.cli_bench import bench_command  # noqa: E402
from services.cli_ledger import ledger_app  # noqa: E402

app.add_typer(ledger_app, name="ledger")
app.command("bench")(bench_command)


def main() -> None:
    app(prog_name="quire")


if __name__ == "__main__":
    main()
