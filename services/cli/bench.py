"""``quire bench``: the command line of services/bench/run.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from services.bench.limits import CLIENTS_MAX, FSYNC_PROBE_S, LEDGERS_MAX
from services.cli.common import global_options
from services.cluster.limits import BOOKIES_MAX


def bench_command(
    ctx: typer.Context,
    gateway: Annotated[
        str | None,
        typer.Option(
            show_default=False,
            help="the gateway to load [default: the global --gateway / QUIRE_GATEWAY]",
        ),
    ] = None,
    local: Annotated[
        bool,
        typer.Option(
            "--local",
            help="start a throwaway ZooKeeper, bookies and gateway in a temp dir (fsync on)",
        ),
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(show_default=False, help="API token [default: the global --token]"),
    ] = None,
    ca_file: Annotated[
        Path | None,
        typer.Option(
            show_default=False,
            exists=True,
            dir_okay=False,
            readable=True,
            help="CA bundle an https:// gateway is verified against "
            "[default: the global --ca-file / QUIRE_CA_FILE]",
        ),
    ] = None,
    tls: Annotated[
        bool,
        typer.Option(
            "--tls",
            help="with --local: every service over TLS, with certificates of a CA made for "
            "the run (as quire up --tls), the load too",
        ),
    ] = False,
    ledgers: Annotated[int, typer.Option(min=1, max=LEDGERS_MAX, help="ledgers written")] = 1,
    ensemble: Annotated[int, typer.Option("--ensemble", "-e", min=1, help="ensemble size E")] = 3,
    write_quorum: Annotated[
        int, typer.Option("--write-quorum", "-w", min=1, help="write quorum Qw")
    ] = 2,
    ack_quorum: Annotated[int, typer.Option("--ack-quorum", "-a", min=1, help="ack quorum Qa")] = 2,
    entry_size: Annotated[
        int, typer.Option(min=1, max=5 * 1024 * 1024, help="bytes per entry")
    ] = 1024,
    concurrency: Annotated[
        int,
        typer.Option(min=1, max=CLIENTS_MAX, help="clients, each with one request in flight"),
    ] = 64,
    batch: Annotated[
        int,
        typer.Option(
            min=1, max=10_000, help="entries per request: 1 = raw single-entry adds, >1 = JSON"
        ),
    ] = 1,
    rate: Annotated[
        float, typer.Option(min=0.0, help="requests/s of all clients together; 0 = unthrottled")
    ] = 0.0,
    duration: Annotated[float, typer.Option(min=0.1, help="seconds counted")] = 10.0,
    warmup: Annotated[float, typer.Option(min=0.0, help="seconds before counting")] = 1.0,
    fsync_probe_s: Annotated[
        float,
        typer.Option(
            min=0.1,
            max=60.0,
            help="with --local: seconds of the raw fsync probe (4 KiB append + fsync) of its "
            "temp dir's disk, before the cluster starts",
        ),
    ] = FSYNC_PROBE_S,
    bookies: Annotated[int, typer.Option(min=1, max=BOOKIES_MAX, help="bookies of --local")] = 3,
    load_procs: Annotated[int, typer.Option(min=1, max=64, help="load generator processes")] = 1,
    keep_ledgers: Annotated[
        bool,
        typer.Option("--keep-ledgers", help="do not delete the ledgers from --gateway afterwards"),
    ] = False,
    work_dir: Annotated[
        Path | None,
        typer.Option(show_default=False, help="where --local makes its temp dir [default: TMPDIR]"),
    ] = None,
    keep: Annotated[
        bool, typer.Option("--keep", help="keep the temp dir of --local (logs, data)")
    ] = False,
    profile: Annotated[
        Path | None,
        typer.Option(
            show_default=False,
            help="record a py-spy profile of the gateway during the counted window into DIR",
        ),
    ] = None,
    py_spy: Annotated[str, typer.Option(help="the py-spy executable for --profile")] = "py-spy",
    log: Annotated[
        bool,
        typer.Option(
            "--log",
            help="append to a fresh log (the gateway takes its writer role) instead of "
            "adding to ledgers",
        ),
    ] = False,
    roll_every_s: Annotated[
        float, typer.Option(min=0.0, help="with --log: roll the log every this many s (0: never)")
    ] = 5.0,
    idempotency_keys: Annotated[
        bool,
        typer.Option(
            "--idempotency-keys", help="with --log: a unique Idempotency-Key on every request"
        ),
    ] = False,
    handover: Annotated[
        bool,
        typer.Option(
            "--handover",
            help="with --log: then time writer hand-overs to a second gateway (with --local "
            "one more is started) while the first is busy",
        ),
    ] = False,
    handover_reps: Annotated[
        int, typer.Option(min=1, max=1000, help="hand-overs timed with --handover")
    ] = 5,
    forwarded: Annotated[
        bool,
        typer.Option(
            "--forwarded",
            help="with --log: append through a second gateway, which forwards every append "
            "to the log's writer (with --local one more is started)",
        ),
    ] = False,
    second_gateway: Annotated[
        str | None,
        typer.Option(
            show_default=False,
            help="the second gateway of --handover or --forwarded without --local",
        ),
    ] = None,
    stream: Annotated[
        bool,
        typer.Option(
            "--stream",
            help="send single records over streaming appends (a WebSocket per client, "
            "--in-flight records in flight on each) instead of one request per record",
        ),
    ] = False,
    in_flight: Annotated[
        int, typer.Option(min=1, max=10_000, help="with --stream: records in flight per stream")
    ] = 256,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet", "-q", help="no progress on stderr (a bar on a terminal, else a line per 2 s)"
        ),
    ] = False,
) -> None:
    """Measure add throughput and latency through a gateway (like BookKeeper's
    'benchmark writes').

    Creates --ledgers ledgers on the gateway, then --concurrency clients (in
    a separate load process, one keep-alive connection each) add entries
    back to back, or at --rate requests/s, for --duration seconds after a
    --warmup. Prints adds/s (entries), MB/s, latency p50/p95/p99/p99.9, the
    CPU of the load, the gateway and the bookies, and with --local the peak
    RSS of the gateway and of the largest bookie; the LAST stdout line is
    one JSON object of all that. The ledgers are deleted afterwards
    (--keep-ledgers keeps them); --local removes its whole cluster, also on
    Ctrl-C.

    --log appends records to one fresh log instead (rolled every
    --roll-every-s, with --idempotency-keys a unique key per request) and adds
    the rolls and, with --handover, the writer hand-over time (from POST
    /writer on the other gateway to its first acknowledged append; median and
    max of --handover-reps) to the report and the JSON line.

    --stream sends single records over streaming appends instead: each of the
    --concurrency clients opens one WebSocket (to its ledger, or to the log
    with --log) and keeps --in-flight records in flight on it; a record's
    latency runs from its send to its acknowledgement.
    """
    from services.bench.config import BenchConfig
    from services.bench.run import main

    options = global_options(ctx)
    if local and gateway is not None:
        raise typer.BadParameter("give --gateway or --local, not both", param_hint="--local")
    if tls and not local:
        raise typer.BadParameter(
            "--tls starts a --local cluster over TLS; for a gateway of yours give its "
            "https:// URL and --ca-file",
            param_hint="--tls",
        )
    config = BenchConfig(
        gateway=None if local else (gateway or options.gateway).rstrip("/"),
        token=token or options.token,
        ca_file=ca_file or options.ca_file,
        local=local,
        tls=tls,
        bookies=bookies,
        ledgers=ledgers,
        ensemble=ensemble,
        write_quorum=write_quorum,
        ack_quorum=ack_quorum,
        entry_size=entry_size,
        concurrency=concurrency,
        batch=batch,
        rate=rate,
        duration_s=duration,
        warmup_s=warmup,
        fsync_probe_s=fsync_probe_s,
        load_procs=load_procs,
        keep_ledgers=keep_ledgers,
        work_dir=work_dir,
        keep=keep,
        profile=profile,
        py_spy=py_spy,
        log=log,
        roll_every_s=roll_every_s,
        idempotency_keys=idempotency_keys,
        handover=handover,
        forwarded=forwarded,
        handover_reps=handover_reps,
        second_gateway=second_gateway.rstrip("/") if second_gateway else None,
        quiet=quiet,
        stream=stream,
        in_flight=in_flight,
    )
    code = main(config)
    if code:
        raise typer.Exit(code)
