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
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from services.bench.config import BenchConfig, BenchError
from services.bench.limits import LEDGER_CREATE_THREADS, WRITABLE_WAIT_S
from services.bench.log_bench import run_log
from services.bench.measure import local_pid_listening_on, raw_fsync
from services.bench.report import report
from services.bench.window import measure, note
from services.cli.client import GatewayClient
from services.errors import NotEnoughBookies, QuireError

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
            tls=config.tls,
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
    """The second gateway of ``--handover`` or ``--forwarded``, on the port after the
    bookies'."""
    from services.cluster.config import ClusterError

    note("quire bench: starting a second gateway")
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
            client = local.client = GatewayClient(url, config.token, ca_file=config.ca_file)
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
            with GatewayClient(url, config.token, ca_file=config.ca_file) as client:
                client.request("DELETE", f"/v1/ledgers/{ledger_id}")
        except QuireError:
            with lock:
                failed += 1

    with ThreadPoolExecutor(LEDGER_CREATE_THREADS) as pool:
        list(pool.map(delete_one, ledger_ids))
    return failed


# -- running --------------------------------------------------------------------


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
            probe_s = config.fsync_probe_s
            note(f"quire bench: raw fsync (4 KiB append + fsync) in {work} for {probe_s:g}s")
            fsync = raw_fsync(work, probe_s)
            note(
                f"  {fsync['raw_fsync_per_s']:,.0f} fsync/s, p50 {fsync['raw_fsync_p50_ms']} ms, "
                f"p99 {fsync['raw_fsync_p99_ms']} ms"
            )
            cluster = start_local_cluster(config, work / "cluster")
            gateway_proc = next(p for p in cluster.services if p.name == "gateway")
            url = gateway_proc.url
            if cluster.tls is not None:
                config.ca_file = cluster.tls.ca
            gateway_pid = gateway_proc.pid
            bookie_pids = [p.pid for p in cluster.services if p.module == "bookie"]
        else:
            gateway_pid = _local_gateway_pid(url)
            bookie_pids = []
        if config.log:
            second = config.second_gateway
            if cluster is not None and (config.handover or config.forwarded):
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
