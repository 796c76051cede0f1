"""Re-replication speed: how fast auto-recovery makes a lost bookie's ledgers whole.

Starts its own ZooKeeper, bookies, gateway, auditor (``--lost-bookie-delay 0``) and
replicator in a temporary directory (or uses a running cluster with ``--gateway``,
``--zk`` and ``--zk-root``), writes ``--ledgers`` CLOSED ledgers of ``--entries``
entries of ``--entry-bytes`` (E=3, Qw=3, Qa=2 by default), runs a client adding at a
steady rate, measures its p99, SIGKILLs one bookie (one outside the client's
ensemble) and times until no fragment names it and no mark is left, measuring the
client's p99 during the repair. ``detect_s`` is the kill to the first mark (the
bookie's ZooKeeper session time-out, 4 s here, then the auditor); ``repair_s`` the
first mark to the end, which ``ledgers_per_min`` and ``mb_per_s`` are computed over. Then, with
``--audit-ledgers N``, writes N more (empty, CLOSED) ledgers' metadata straight into
ZooKeeper and times one full audit of every ledger. Last line JSON:
``ledgers_per_min``, ``mb_per_s``, ``client_p99_ms_before``, ``client_p99_ms_during``,
``audit_100k_s`` (the audit's time, scaled to 100,000 ledgers when N differs), with
the conditions beside them.

    .venv/bin/python benchmarks/rereplication.py                       # the issue's run
    .venv/bin/python benchmarks/rereplication.py --ledgers 100 --audit-ledgers 10000
    .venv/bin/python benchmarks/rereplication.py --throttle-mb-per-s 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from kazoo.client import KazooClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from services.bench.measure import cpu_model, local_pid_listening_on  # noqa: E402
from services.bench.metadata import FIRST_WRITTEN_ID, write_closed_ledgers  # noqa: E402
from services.cluster.processes import (  # noqa: E402
    ServiceProcess,
    ZooKeeperProcess,
    free_port,
    stop_processes,
)
from services.protocol import replication  # noqa: E402
from services.protocol.metadata import LedgerMetadata  # noqa: E402
from services.zk import paths as zkpaths  # noqa: E402

SECRET = "bench-secret"
SESSION_TIMEOUT_S = 4


def p99_ms(samples: list[float]) -> float:
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000


class Cluster:
    """ZooKeeper, bookies, gateway, auditor and replicator, stopped by pid at the end."""

    def __init__(self, work: Path, bookies: int, throttle: int, verbose: bool) -> None:
        self.work = work
        self.procs: list[ServiceProcess | ZooKeeperProcess] = []
        self.zk = ZooKeeperProcess(work / "zk", free_port())
        self.root = "/bench"
        self.bookies: list[ServiceProcess] = []
        self.count = bookies
        self.throttle = throttle
        self.env = {**os.environ, "QUIRE_CLUSTER_SECRET": SECRET}
        self.gateway: ServiceProcess | None = None
        self.auditor: ServiceProcess | None = None
        self.replicator: ServiceProcess | None = None
        self.verbose = verbose

    def _service(self, module: str, args: list[str], name: str) -> ServiceProcess:
        # A short session time-out: a killed bookie's registration goes within 4 s.
        common = ["--zk", self.zk.connect_string, "--zk-root", self.root]
        common += ["--zk-session-timeout", str(SESSION_TIMEOUT_S)]
        proc = ServiceProcess(
            module,
            [*common, *args],
            "127.0.0.1",
            free_port(),
            self.work / f"{name}.log",
            env=self.env,
            name=name,
        )
        self.procs.append(proc)
        return proc.start()  # type: ignore[return-value]

    def start(self) -> None:
        self.procs.append(self.zk)
        self.zk.start()
        self.zk.wait_ready()
        for i in range(self.count):
            data = self.work / f"bookie-{i}"
            self.bookies.append(self._service("bookie", ["--data-dir", str(data)], f"bookie-{i}"))
        self.gateway = self._service("gateway", [], "gateway")
        self.auditor = self._service(
            "auditor", ["--lost-bookie-delay", "0", "--audit-interval", "86400"], "auditor"
        )
        repl_args = ["--rereplication-bytes-per-s-max", str(self.throttle)]
        self.replicator = self._service("replicator", repl_args, "replicator")
        for proc in [*self.bookies, self.gateway, self.auditor, self.replicator]:
            proc.wait_healthy(60.0)

    def stop(self) -> None:
        stop_processes(self.procs, 5.0)


def _steady_client(gateway: str, rate: float, headers: dict[str, str], out: Any, stop: Any) -> None:
    """The steady client's process: adds 1 KiB entries to one ledger at ``rate``; sends
    its ensemble first, then (once ``stop`` is set) every add's start time, latency and
    the error count. A process of its own, so the benchmark's polling (JSON parsing
    under the GIL) does not inflate the latencies it measures."""
    samples: list[tuple[float, float]] = []
    errors = 0
    with httpx.Client(base_url=gateway, timeout=60.0, headers=headers) as http:
        created = http.post("/v1/ledgers", json={}).json()
        lid = created["ledger_id"]
        out.send(sorted(created["fragments"][-1]["bookies"]))
        interval = 1.0 / rate
        next_at = time.monotonic()
        payload = os.urandom(1024)
        while not stop.is_set():
            now = time.monotonic()
            if now < next_at:
                stop.wait(next_at - now)
                continue
            next_at += interval
            start = time.monotonic()
            r = http.post(f"/v1/ledgers/{lid}/entries", content=payload)
            if r.status_code != 200:
                errors += 1
                if r.status_code == 409:  # closed by a recovery: go on with a new one
                    lid = http.post("/v1/ledgers", json={}).json()["ledger_id"]
                continue
            samples.append((start, time.monotonic() - start))
    out.send((samples, errors))


class SteadyClient:
    """The steady client, in a process of its own (``_steady_client``); time.monotonic
    is the same clock in both processes."""

    def __init__(self, gateway: str, rate: float, token: str | None) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._stop = ctx.Event()
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._proc = ctx.Process(
            target=_steady_client, args=(gateway, rate, headers, child, self._stop), daemon=True
        )
        self.samples: list[tuple[float, float]] = []
        self.errors = 0
        self.ensemble: set[str] = set()
        self._stopped = False

    def start(self, deadline_s: float = 60.0) -> None:
        self._proc.start()
        if not self._conn.poll(deadline_s):
            raise SystemExit("the steady client could not create its ledger")
        self.ensemble = set(self._conn.recv())

    def stop(self) -> None:
        if self._stopped or self._proc.pid is None:
            return
        self._stopped = True
        self._stop.set()
        if self._conn.poll(60):
            self.samples, self.errors = self._conn.recv()
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()

    def window(self, start: float, end: float) -> list[float]:
        return [lat for t, lat in self.samples if start <= t < end]


async def write_ledgers(gateway: str, args: argparse.Namespace, token: str | None) -> list[int]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    payloads = [os.urandom(args.entry_bytes) for _ in range(args.entries)]
    body = {"entries": [__import__("base64").b64encode(p).decode() for p in payloads]}
    ids: list[int] = []
    limit = asyncio.Semaphore(args.concurrency)
    done = 0

    async def one(http: httpx.AsyncClient) -> None:
        nonlocal done
        async with limit:
            spec = {"ensemble_size": 3, "write_quorum": args.write_quorum, "ack_quorum": 2}
            r = await http.post("/v1/ledgers", json=spec)
            r.raise_for_status()
            lid = r.json()["ledger_id"]
            (await http.post(f"/v1/ledgers/{lid}/entries", json=body)).raise_for_status()
            (await http.post(f"/v1/ledgers/{lid}/close")).raise_for_status()
            ids.append(lid)
            done += 1
            if done % 100 == 0:
                print(f"  wrote {done}/{args.ledgers} ledgers", file=sys.stderr)

    async with httpx.AsyncClient(base_url=gateway, timeout=120.0, headers=headers) as http:
        await asyncio.gather(*(one(http) for _ in range(args.ledgers)))
    return sorted(ids)


def ledgers_naming(zk: KazooClient, ids: list[int], bookie: str) -> tuple[int, int]:
    """(ledgers whose fragments name ``bookie``, entries ``bookie`` held in them)."""
    naming, entries = 0, 0
    asyncs = [zk.get_async(zkpaths.ledger(lid)) for lid in ids]
    for result in asyncs:
        md = LedgerMetadata.from_json(result.get(30)[0])
        if bookie in md.bookies():
            naming += 1
            for span in replication.spans(md):
                if bookie in span.bookies and span.last is not None:
                    index = span.bookies.index(bookie)
                    entries += replication.count_on(
                        span.first, span.last, index, md.ensemble_size, md.write_quorum
                    )
    return naming, entries


def marks(zk: KazooClient) -> int:
    count = 0
    stack = [zkpaths.UNDER_REPLICATED_LEDGERS]
    while stack:
        path = stack.pop()
        try:
            children = zk.get_children(path)
        except Exception:  # noqa: BLE001 - vanished meanwhile
            continue
        for child in children:
            if child.startswith("L"):
                count += 1
            elif child.isdigit():
                stack.append(f"{path}/{child}")
    return count


def time_audit(
    auditor: str, gateway: str, token: str | None, secret: str | None, deadline_s: float
) -> tuple[float, int]:
    """The on-demand full check's duration and the ledgers it covered."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    auditor_headers = {"X-Cluster-Secret": secret} if secret else {}
    with httpx.Client(timeout=30.0, headers=headers) as http:

        def status() -> dict:
            r = http.get(f"{auditor}/v1/status", headers=auditor_headers)
            r.raise_for_status()
            return dict(r.json())

        before = status().get("last_audit")
        start = time.monotonic()
        http.post(f"{gateway}/v1/admin/audit").raise_for_status()
        while time.monotonic() - start < deadline_s:
            doc = status()
            last = doc.get("last_audit")
            full = last and last.get("kind", "full") == "full"
            if full and last != before and not doc.get("audit_running"):
                duration = last.get("duration_s")
                took = float(duration) if duration is not None else time.monotonic() - start
                return took, int(last.get("ledgers") or 0)
            time.sleep(0.2)
    raise SystemExit(f"the audit did not end within {deadline_s} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ledgers", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=100)
    parser.add_argument("--entry-bytes", type=int, default=1024)
    parser.add_argument("--write-quorum", type=int, default=3)
    parser.add_argument("--bookies", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--client-rate", type=float, default=50.0, help="adds/s of the client")
    parser.add_argument("--measure-s", type=float, default=10.0, help="the 'before' window")
    parser.add_argument("--throttle-mb-per-s", type=float, default=0.0, help="0: unlimited")
    parser.add_argument("--audit-ledgers", type=int, default=100_000, help="0: no audit run")
    parser.add_argument("--deadline-s", type=float, default=900.0)
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--gateway", help="use a running cluster (with --zk, --zk-root)")
    parser.add_argument("--auditor", help="the running cluster's auditor URL")
    parser.add_argument("--zk")
    parser.add_argument("--zk-root", default="/quire")
    parser.add_argument("--token")
    parser.add_argument("--cluster-secret", default=os.environ.get("QUIRE_CLUSTER_SECRET"))
    args = parser.parse_args()

    work = args.work_dir or Path(tempfile.mkdtemp(prefix="quire-rerepl-"))
    cluster: Cluster | None = None
    client: SteadyClient | None = None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        if args.gateway:
            gateway, auditor = args.gateway, args.auditor
            zk_hosts = f"{args.zk}{args.zk_root}"
        else:
            throttle = int(args.throttle_mb_per_s * 1024 * 1024)
            cluster = Cluster(work, args.bookies, throttle, verbose=True)
            cluster.start()
            assert cluster.gateway and cluster.auditor
            gateway, auditor = cluster.gateway.url, cluster.auditor.url
            zk_hosts = f"{cluster.zk.connect_string}{cluster.root}"
        zk = KazooClient(hosts=zk_hosts)
        zk.start(30)
        print(f"writing {args.ledgers} ledgers x {args.entries} entries ...", file=sys.stderr)
        ids = asyncio.run(write_ledgers(gateway, args, args.token))
        bookie_ids = sorted(zk.get_children(zkpaths.BOOKIES))
        client = SteadyClient(gateway, args.client_rate, args.token)
        client.start()
        time.sleep(args.measure_s)  # the measured 'before' window, not a synchronisation
        before_end = time.monotonic()
        # A bookie outside the client's ensemble: the client measures the repair's
        # interference, not its own ensemble change.
        victim = next((b for b in bookie_ids if b not in client.ensemble), bookie_ids[0])
        naming0, entries0 = ledgers_naming(zk, ids, victim)
        pid = local_pid_listening_on(int(victim.rsplit(":", 1)[1]))
        if pid is None:
            raise SystemExit(f"cannot find the pid of bookie {victim} on this machine")
        print(f"SIGKILL {victim} (in {naming0} ledgers, {entries0} entries)", file=sys.stderr)
        os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        first_mark: float | None = None
        while True:
            if time.monotonic() - t0 > args.deadline_s:
                raise SystemExit(f"not repaired within {args.deadline_s} s")
            # Counting the marks is a few ZooKeeper calls; reading every ledger's
            # metadata is a thousand, whose CPU would weigh on the client measured, so
            # it is read only once the marks are gone.
            left = marks(zk)
            now = time.monotonic()
            if first_mark is None and left > 0:
                first_mark = now
            print(f"  {left} marks", file=sys.stderr)
            if left == 0 and (first_mark is not None or now - t0 > 30):
                naming, _ = ledgers_naming(zk, ids, victim)
                print(f"  {naming} ledgers name {victim}", file=sys.stderr)
                if naming == 0:
                    break
            time.sleep(0.25)
        done = time.monotonic()
        elapsed = done - t0
        repair_s = done - (first_mark or t0)
        client.stop()
        during = client.window(before_end, done)
        before = client.window(before_end - args.measure_s, before_end)
        copied_mb = entries0 * args.entry_bytes / 1e6
        result = {
            "ledgers": args.ledgers,
            "ledgers_repaired": naming0,
            "entries_copied": entries0,
            "detect_s": round(elapsed - repair_s, 2),
            "repair_s": round(repair_s, 2),
            "kill_to_whole_s": round(elapsed, 2),
            "ledgers_per_min": round(naming0 / repair_s * 60, 1),
            "mb_per_s": round(copied_mb / repair_s, 2),
            "client_rate": args.client_rate,
            "client_p99_ms_before": round(p99_ms(before), 2),
            "client_p99_ms_during": round(p99_ms(during), 2),
            "client_errors": client.errors,
            "throttle_mb_per_s": args.throttle_mb_per_s,
            "audit_ledgers": args.audit_ledgers,
            "audit_100k_s": None,
            "cpu_model": cpu_model(),
        }
        if args.audit_ledgers and auditor:
            live = [b for b in bookie_ids if b != victim]
            print(f"writing {args.audit_ledgers} ledgers' metadata ...", file=sys.stderr)
            write_closed_ledgers(zk, FIRST_WRITTEN_ID, args.audit_ledgers, live)
            secret = SECRET if cluster is not None else args.cluster_secret
            audit_s, covered = time_audit(auditor, gateway, args.token, secret, args.deadline_s)
            covered = covered or args.audit_ledgers
            result["audit_s"] = round(audit_s, 2)
            result["audit_ledgers_checked"] = covered
            result["audit_100k_s"] = round(audit_s * 100_000 / covered, 2)
        zk.stop()
        print(json.dumps(result))
    finally:
        if client is not None:
            client.stop()
        if cluster is not None:
            cluster.stop()
        if not args.keep and not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
