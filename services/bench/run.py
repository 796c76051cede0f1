"""``quire bench``: add throughput and latency through a gateway, like BookKeeper's
``benchmark writes``.

    quire bench --local                                  # a throwaway local cluster
    quire bench --local --batch 100 --ledgers 16         # batched adds
    quire bench --local --concurrency 1 --rate 50        # latency at light load
    quire bench --gateway http://127.0.0.1:8080          # an existing gateway

How it runs, in order:

1. ``--local``: a temporary directory, the disk's raw fsync latency measured
   there (4 KiB append + fsync), then ZooKeeper, the bookies and a gateway
   started in it by ``services/cluster/local.py`` (the supervisor of ``quire up``),
   on free ports, with fsync on. Otherwise the gateway of ``--gateway``.
2. ``--ledgers`` ledgers created through that gateway (which then holds
   their write handles: every add goes to the gateway that created its
   ledger).
3. The load: ``--load-procs`` separate processes (``services/bench/load.py``:
   raw HTTP/1.1 on asyncio protocols, uvloop, one keep-alive connection per
   client; ``--stream``: one WebSocket per client, services/bench/stream_load.py),
   ``--concurrency`` clients in all, each cycling over its share of the ledgers
   with one request in flight. A warm-up, then ``--duration``
   counted seconds. This process only orchestrates and samples: the peak
   resident memory and the CPU of the gateway and of each bookie (psutil,
   every 0.1 s), the generator's CPU, and what the rest of the machine used.
4. The ledgers are deleted (an existing gateway; ``--keep-ledgers`` keeps
   them) or the whole local cluster is stopped by pid and its directory
   removed, also on Ctrl-C, SIGTERM or an error.

``--log`` appends to one fresh log instead (``services/bench/log_bench.py``: rolls,
idempotency keys, the writer hand-over time).

A live progress line goes to stderr; stdout gets a summary and, as its LAST
line, one JSON object (``adds_per_s`` counts entries, also in batches).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from services.bench.config import (
    FSYNC_PROBE_S,
    LEDGER_CREATE_THREADS,
    LOAD_SLACK_S,
    START_DELAY_S,
    WRITABLE_WAIT_S,
    BenchConfig,
    BenchError,
)
from services.bench.measure import (
    Sampler,
    busy_cpu_s,
    local_pid_listening_on,
    profile_report,
    raw_fsync,
)
from services.bench.procs import LoadProcesses, load_specs
from services.bench.report import Progress, report, summarize
from services.cli.client import GatewayClient
from services.errors import NotEnoughBookies, QuireError, invariant

if TYPE_CHECKING:  # imported when a local cluster starts: most runs use a remote gateway
    from services.cluster.local import LocalCluster
    from services.cluster.processes import ServiceProcess


def start_local_cluster(config: BenchConfig, data_dir: Path) -> LocalCluster:
    """ZooKeeper, ``config.bookies`` bookies and a gateway under ``data_dir`` (fsync on).

    Returns the started ``LocalCluster``; the caller stops it (it is a context
    manager). What started before a failure keeps running until then."""
    from services.cluster.config import ClusterError, UpConfig
    from services.cluster.local import LocalCluster
    from services.cluster.processes import free_port, free_port_block
    from services.console import Ui

    cluster = LocalCluster(
        UpConfig(
            data_dir=data_dir,
            bookies=config.bookies,
            # The port after the bookies' is --handover's second gateway (no auditor here).
            gateway_port=free_port_block(config.bookies + 2),
            zk_port=free_port(),
            zk_root="/quire-bench",
            without=frozenset({"auditor", "replicator"}),
        ),
        ui=Ui("quire bench", out=sys.stderr),
    )
    try:
        cluster.start()
    except ClusterError as exc:
        cluster.stop()
        raise BenchError(str(exc)) from None
    except BaseException:
        cluster.stop()
        raise
    if not any(p.name == "gateway" for p in cluster.services):
        cluster.stop()
        raise BenchError("the local cluster has no gateway (is gateway/__main__.py there?)")
    return cluster


def _second_gateway(cluster: LocalCluster, config: BenchConfig) -> ServiceProcess:
    """``--handover``'s second gateway, on the port after the bookies'."""
    from services.cluster.config import ClusterError

    note("quire bench: starting a second gateway for --handover")
    try:
        return cluster.add_service("gateway-2", "gateway", cluster.config.gateway_port
                                   + config.bookies + 1)  # fmt: skip
    except ClusterError as exc:
        raise BenchError(str(exc)) from None


# -- ledgers ------------------------------------------------------------------


def create_ledgers(config: BenchConfig, url: str) -> list[int]:
    """``config.ledgers`` ledgers through the gateway at ``url``; the first one waits
    (up to ``WRITABLE_WAIT_S``) until the gateway sees enough writable bookies."""
    body = {
        "ensemble_size": config.ensemble,
        "write_quorum": config.write_quorum,
        "ack_quorum": config.ack_quorum,
    }
    local = threading.local()

    def create_one(_: int = 0) -> int:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = GatewayClient(url, config.token)
        return client.json("POST", "/v1/ledgers", json=body)["ledger_id"]

    end = time.monotonic() + WRITABLE_WAIT_S
    while True:
        try:
            first = create_one()
            break
        except NotEnoughBookies:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)
    with ThreadPoolExecutor(LEDGER_CREATE_THREADS) as pool:
        rest = list(pool.map(create_one, range(config.ledgers - 1)))
    return [first, *rest]


def delete_ledgers(config: BenchConfig, url: str, ledger_ids: list[int]) -> int:
    """Delete the benchmark's ledgers; returns how many could not be deleted."""
    failed = 0
    lock = threading.Lock()

    def delete_one(ledger_id: int) -> None:
        nonlocal failed
        try:
            with GatewayClient(url, config.token) as client:
                client.request("DELETE", f"/v1/ledgers/{ledger_id}")
        except QuireError:
            with lock:
                failed += 1

    with ThreadPoolExecutor(LEDGER_CREATE_THREADS) as pool:
        list(pool.map(delete_one, ledger_ids))
    return failed


# -- running --------------------------------------------------------------------


def note(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def run(config: BenchConfig) -> dict:
    """The whole benchmark; returns the summary (the JSON of the last line)."""
    config.check()
    work: Path | None = None
    cluster = None
    ledger_ids: list[int] = []
    url = config.gateway or ""
    fsync: dict = {}
    try:
        if config.local:
            work = Path(tempfile.mkdtemp(prefix="quire-bench-", dir=config.work_dir))
            note(f"quire bench: raw fsync (4 KiB append + fsync) in {work} for {FSYNC_PROBE_S:g}s")
            fsync = raw_fsync(work, FSYNC_PROBE_S)
            note(
                f"  {fsync['raw_fsync_per_s']:,.0f} fsync/s, p50 {fsync['raw_fsync_p50_ms']} ms, "
                f"p99 {fsync['raw_fsync_p99_ms']} ms"
            )
            cluster = start_local_cluster(config, work / "cluster")
            gateway_proc = next(p for p in cluster.services if p.name == "gateway")
            url = gateway_proc.url
            gateway_pid = gateway_proc.pid
            bookie_pids = [p.pid for p in cluster.services if p.module == "bookie"]
        else:
            gateway_pid = _local_gateway_pid(url)
            bookie_pids = []
        if config.log:
            from services.bench.log_bench import run_log

            second = config.second_gateway
            if cluster is not None and config.handover:
                second = _second_gateway(cluster, config).url
            result = run_log(config, url, second, gateway_pid, bookie_pids)
            result.update(fsync)
            return result
        note(f"quire bench: creating {config.ledgers} ledger(s) on {url}")
        ledger_ids = create_ledgers(config, url)
        result = measure(config, url, ledger_ids, gateway_pid, bookie_pids)
        result.update(fsync)
        return result
    finally:
        # Cleaning up must finish: a second Ctrl-C or SIGTERM would leave processes
        # behind (ZooKeeper is stopped last). ``main`` restores both handlers.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if ledger_ids and cluster is None and not config.keep_ledgers:
            failed = delete_ledgers(config, url, ledger_ids)
            if failed:
                note(f"quire bench: {failed} ledger(s) could not be deleted")
        if cluster is not None:
            cluster.stop()
        if work is not None:
            if config.keep:
                note(f"quire bench: kept {work}")
            else:
                shutil.rmtree(work, ignore_errors=True)


def _local_gateway_pid(url: str) -> int | None:
    parts = urlsplit(url)
    if parts.hostname in ("127.0.0.1", "localhost", "::1") and parts.port:
        return local_pid_listening_on(parts.port)
    return None


def measure(
    config: BenchConfig,
    url: str,
    ledger_ids: list[int],
    gateway_pid: int | None,
    bookie_pids: list[int],
    extra_spec: dict | None = None,
) -> dict:
    """Run the load processes and sample the services over the counted window
    (``extra_spec`` goes into every load process's spec: ``--log``'s log)."""
    gateway = Sampler(gateway_pid) if gateway_pid else None
    bookies = [Sampler(pid) for pid in bookie_pids]
    for sampler in [gateway, *bookies]:
        if sampler is not None:
            sampler.start()
    start_at = time.time() + START_DELAY_S
    loads = LoadProcesses()
    progress = Progress(quiet=config.quiet)
    profiler = None
    try:
        specs = load_specs(config, url, ledger_ids, start_at)
        for spec in specs:
            spec.update(extra_spec or {})
        loads.start(specs)
        count_from = start_at + config.warmup_s
        count_to = count_from + config.duration_s

        def show_until(deadline: float) -> None:
            while (left := deadline - time.time()) > 0:
                time.sleep(min(progress.interval_s, left))
                rss = gateway.rss_max / 2**20 if gateway is not None else None
                progress.show(loads.snapshot(), config.duration_s, rss)

        show_until(count_from)
        cpu0 = _cpu(gateway, bookies)
        busy0, wall0 = busy_cpu_s(), time.monotonic()
        if config.profile is not None and gateway_pid:
            profiler = _start_profiler(config, gateway_pid)
        show_until(count_to)
        cpu1 = _cpu(gateway, bookies)
        busy, wall = busy_cpu_s() - busy0, time.monotonic() - wall0
        progress.clear()
        outputs = loads.wait(LOAD_SLACK_S)
    finally:
        progress.clear()
        loads.stop()
        for sampler in [gateway, *bookies]:
            if sampler is not None:
                sampler.stop()
        if profiler is not None:
            _finish_profiler(config, profiler)
    gateway_cpu = (cpu1[0] - cpu0[0]) / wall if gateway is not None else None
    bookie_cpu = (sum(cpu1[1:]) - sum(cpu0[1:])) / wall if bookies else None
    return summarize(config, url, outputs, gateway, bookies, gateway_cpu, bookie_cpu, busy / wall)


def _cpu(gateway: Sampler | None, bookies: list[Sampler]) -> list[float]:
    return [gateway.cpu_s() if gateway is not None else 0.0, *(b.cpu_s() for b in bookies)]


def _start_profiler(config: BenchConfig, pid: int) -> subprocess.Popen:
    """py-spy over the gateway for the counted window (``--profile DIR``)."""
    invariant(config.profile is not None, "the profiler runs only with --profile")
    config.profile.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [
            config.py_spy, "record", "--pid", str(pid),
            "--duration", str(max(1, int(config.duration_s))),
            "--rate", "250", "--format", "raw",
            "--output", str(config.profile / "gateway.folded"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip


def _finish_profiler(config: BenchConfig, proc: subprocess.Popen) -> None:
    invariant(config.profile is not None, "the profiler runs only with --profile")
    try:
        proc.wait(LOAD_SLACK_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    folded = config.profile / "gateway.folded"
    if folded.exists():
        report = profile_report(folded, top=25)
        (config.profile / "gateway.top.txt").write_text(report + "\n")
        note(f"quire bench: profile of the gateway ({folded}):\n{report}")


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(config: BenchConfig) -> int:
    """Run, print the report and the JSON line; the exit code."""
    previous = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, _terminate),
        signal.SIGINT: signal.getsignal(signal.SIGINT),
    }
    try:
        summary = run(config)
    except KeyboardInterrupt:
        note("quire bench: interrupted; stopped everything it started")
        return 130
    except (BenchError, QuireError) as exc:
        code = f"{exc.code}: " if isinstance(exc, QuireError) else ""
        note(f"quire bench: error: {code}{exc}")
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(report(summary))
    print(json.dumps(summary), flush=True)
    if summary["entries"] == 0:
        note(f"quire bench: error: no add succeeded ({summary.get('first_error')})")
        return 1
    return 0
