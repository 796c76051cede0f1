"""``quire up``: the whole cluster on this machine (``services/cluster/local.py``)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from services.cli.common import check_zk
from services.cluster.limits import BOOKIES_MAX

if TYPE_CHECKING:
    from services.cluster.config import ClusterError
    from services.cluster.local import LocalCluster


def up(
    bookies: Annotated[int, typer.Option(min=1, max=BOOKIES_MAX, help="number of bookies")] = 4,
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
    tls: Annotated[
        bool,
        typer.Option(
            "--tls",
            help="every service over TLS, with certificates of a CA kept in DATA_DIR/tls "
            "(printed: how to call the gateway with it)",
        ),
    ] = False,
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
    identity is its host:port). With --tls every service serves HTTPS with
    certificates of a CA kept in DATA_DIR/tls, and the lines printed say how to
    call the gateway with it (curl --cacert, QUIRE_CA_FILE). A child that dies
    is reported and the rest keep running; if ZooKeeper dies, or no service is
    left, quire up stops and exits 1.
    """
    from services.cluster.config import SERVICES, ClusterError, StopRequested, UpConfig
    from services.cluster.local import LocalCluster

    check_zk(zk, zk_root, zk_session_timeout)
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
            tls=tls,
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
                how = cluster.how_to_call()
                if how is not None:
                    cluster.ui.started(how)
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
    from services.cluster.processes import tail

    cluster.ui.error(str(exc))
    if exc.log_path is not None:
        lines = tail(exc.log_path, 12).splitlines()
        cluster.ui.note("\n".join(f"    {line}" for line in lines))
