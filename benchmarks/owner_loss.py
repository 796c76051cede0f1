"""Owner loss under load: how long appends stop when the gateway writing a log dies.

Starts its own ZooKeeper, three bookies and two gateways (A, B) in a temporary
directory. Each run starts a third gateway (D), makes it the writer of a fresh log (its
first append), lets ``--clients`` threads append keyed records through A and B (each
request to one of them at random: a load balancer), SIGKILLs D, and times:

- ``gap_s``: the stall: the longest pause between two acknowledgements that ends after
  the kill (the last before the stall to the first after it);
- ``session_s``: the kill to D's registration leaving ``/gateways`` (its ZooKeeper session
  time-out, ``--session-timeout-s``, is the floor; polled every 20 ms on A);
- ``after_session_s``: the registration leaving to the first acknowledgement.

Every acknowledged key is then checked to be in the log once. Last line JSON: median and
max of each over ``--runs``, with the conditions.

    .venv/bin/python benchmarks/owner_loss.py                    # 10 runs, session 2 s
    .venv/bin/python benchmarks/owner_loss.py --runs 3 --session-timeout-s 4
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from services.cluster.processes import (  # noqa: E402
    ServiceProcess,
    ZooKeeperProcess,
    free_port,
    stop_processes,
)

SECRET = "bench-secret"
# Appends acknowledged (through A and B, forwarded to D) before D is killed.
LOAD_BEFORE_KILL = 100


class Cluster:
    """ZooKeeper, three bookies, gateways A and B; one more gateway per run."""

    def __init__(self, work: Path, session_s: float) -> None:
        self.work = work
        self.session_s = session_s
        self.procs: list[ServiceProcess | ZooKeeperProcess] = []
        self.zk = ZooKeeperProcess(work / "zk", free_port())
        self.env = {**os.environ, "QUIRE_CLUSTER_SECRET": SECRET}
        self.gateways: list[ServiceProcess] = []

    def service(self, module: str, args: list[str], name: str) -> ServiceProcess:
        common = ["--zk", self.zk.connect_string, "--zk-root", "/owner-loss"]
        common += ["--zk-session-timeout", str(self.session_s)]
        proc = ServiceProcess(
            module, [*common, *args], "127.0.0.1", free_port(), self.work / f"{name}.log",
            env=self.env, name=name,
        )  # fmt: skip
        self.procs.append(proc)
        proc.start()
        return proc

    def start(self) -> None:
        self.procs.append(self.zk)
        self.zk.start()
        self.zk.wait_ready()
        bookies = [
            self.service("bookie", ["--data-dir", str(self.work / f"bookie-{i}")], f"bookie-{i}")
            for i in range(3)
        ]
        self.gateways = [self.service("gateway", [], name) for name in ("gateway-a", "gateway-b")]
        for proc in [*bookies, *self.gateways]:
            proc.wait_healthy(60.0)

    def stop(self) -> None:
        stop_processes(self.procs, 5.0)


class Load:
    """Threads appending keyed records, each request to A or B at random, each retried
    with its key until acknowledged; ``acked`` holds (time, key)."""

    def __init__(self, urls: list[str], name: str, clients: int) -> None:
        self.urls = urls
        self.name = name
        self.acked: list[tuple[float, str]] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(clients)
        ]

    def start(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def _run(self, index: int) -> None:
        rng = random.Random(index)
        clients = {url: httpx.Client(base_url=url, timeout=60.0) for url in self.urls}
        seq = 0
        try:
            while not self.stop.is_set():
                key = f"c{index}-{seq}"
                while True:
                    try:
                        r = clients[rng.choice(self.urls)].post(
                            f"/v1/logs/{self.name}/records",
                            content=key.encode(),
                            headers={"Idempotency-Key": key},
                        )
                    except httpx.HTTPError:
                        continue
                    if r.status_code == 200:
                        break
                with self.lock:
                    self.acked.append((time.monotonic(), key))
                seq += 1
        finally:
            for client in clients.values():
                client.close()

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(120)


def live(url: str) -> set[str]:
    doc = httpx.get(url + "/v1/admin/gateways", timeout=10).json()
    return {g["address"] for g in doc["gateways"]}


def read_keys(url: str, name: str) -> list[str]:
    keys: list[str] = []
    start: str | None = None
    with httpx.Client(base_url=url, timeout=30) as http:
        while True:
            params: dict[str, Any] = {"limit": 1000}
            if start is not None:
                params["from"] = start
            doc = http.get(f"/v1/logs/{name}/records", params=params).json()
            keys += [base64.b64decode(r["data"]).decode() for r in doc["records"]]
            start = doc["next"]
            if doc["caught_up"]:
                return keys


def one_run(cluster: Cluster, index: int, clients: int) -> dict[str, float]:
    a, b = (g.url for g in cluster.gateways)
    owner = cluster.service("gateway", [], f"gateway-d{index}")
    owner.wait_healthy(60.0)
    name = f"owner-loss-{index}"
    httpx.put(f"{a}/v1/logs/{name}", timeout=10).raise_for_status()
    httpx.post(
        f"{owner.url}/v1/logs/{name}/records", content=b"first", timeout=30
    ).raise_for_status()
    load = Load([a, b], name, clients).start()
    deadline = time.monotonic() + 30
    while len(load.acked) < LOAD_BEFORE_KILL:  # appends flowing through A and B to D
        if time.monotonic() > deadline:
            raise SystemExit(f"run {index}: no appends acknowledged through A and B")
        time.sleep(0.05)
    killed_at = time.monotonic()
    owner.kill()
    gone_at = None
    while gone_at is None and time.monotonic() < killed_at + cluster.session_s * 5:
        if owner.address not in live(a):
            gone_at = time.monotonic()
        else:
            time.sleep(0.02)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with load.lock:
            after = [t for t, _ in load.acked if t > killed_at]
        if len(after) >= 50:
            break
        time.sleep(0.05)
    load.finish()
    if gone_at is None:
        raise SystemExit(f"run {index}: the killed gateway stayed registered")
    # The stall: the longest pause between two acknowledgements that ends after the kill
    # (appends D answered just before it died still arrive a moment after it).
    times = sorted(t for t, _ in load.acked)
    before, first_after = max(
        ((t0, t1) for t0, t1 in itertools.pairwise(times) if t1 > killed_at),
        key=lambda pair: pair[1] - pair[0],
    )
    # Through A, which may not write the log: its last records show once the writer told
    # the bookies they are confirmed, so read until they do (10 s at most).
    acked = {k for _, k in load.acked}
    deadline = time.monotonic() + 10
    keys = read_keys(a, name)
    while not acked <= set(keys) and time.monotonic() < deadline:
        time.sleep(0.2)
        keys = read_keys(a, name)
    if len(keys) != len(set(keys)):
        raise SystemExit(f"run {index}: a key is in the log twice")
    if not acked <= set(keys):
        raise SystemExit(f"run {index}: acknowledged keys missing: {sorted(acked - set(keys))[:5]}")
    return {
        "gap_s": first_after - before,
        "session_s": gone_at - killed_at,
        "after_session_s": first_after - gone_at,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--session-timeout-s", type=float, default=2.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="quire-owner-loss-") as tmp:
        cluster = Cluster(Path(tmp), args.session_timeout_s)
        try:
            cluster.start()
            runs = []
            for i in range(args.runs):
                run = one_run(cluster, i, args.clients)
                print(
                    json.dumps({"run": i, **{k: round(v, 3) for k, v in run.items()}}), flush=True
                )
                runs.append(run)
        finally:
            cluster.stop()
    summary: dict[str, Any] = {
        "runs": args.runs,
        "clients": args.clients,
        "session_timeout_s": args.session_timeout_s,
    }
    for what in ("gap_s", "session_s", "after_session_s"):
        values = [r[what] for r in runs]
        summary[f"{what}_median"] = round(statistics.median(values), 3)
        summary[f"{what}_max"] = round(max(values), 3)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
