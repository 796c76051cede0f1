"""The load generator processes of ``quire bench`` (``services/bench/load_process.py``): what each
one is asked to do, and starting, watching and stopping them by pid."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import IO
from urllib.parse import urlsplit

from services.bench.config import BenchConfig, BenchError


def client_ledgers(ledger_ids: list[int], concurrency: int) -> list[list[int]]:
    """Each client's ledgers: spread so that every ledger is written and every client
    has at least one (several clients share a ledger when there are fewer ledgers)."""
    if len(ledger_ids) >= concurrency:
        return [ledger_ids[i::concurrency] for i in range(concurrency)]
    return [[ledger_ids[i % len(ledger_ids)]] for i in range(concurrency)]


# -- the load processes -------------------------------------------------------


class LoadProcesses:
    """The generator processes: started together, their stdout lines collected by
    reader threads (the latest progress of each, then its result), stopped by pid."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.progress: dict[int, dict] = {}
        self.results: dict[int, dict] = {}
        self._threads: list[threading.Thread] = []

    def start(self, specs: list[dict]) -> None:
        for index, spec in enumerate(specs):
            proc = subprocess.Popen(
                [sys.executable, "-m", "services.bench.load_process", json.dumps(spec)],
                stdout=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches us; we stop it by pid
                text=True,
            )
            self.procs.append(proc)
            thread = threading.Thread(target=self._read, args=(index, proc.stdout), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _read(self, index: int, stream: IO[str]) -> None:
        for line in stream:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if doc.get("type") == "result":
                self.results[index] = doc
            else:
                self.progress[index] = doc

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def snapshot(self) -> dict:
        docs = list(self.progress.values())
        return {
            "counting": any(d.get("counting") for d in docs),
            "counted_s": max((d.get("counted_s", 0.0) for d in docs), default=0.0),
            "entries": sum(d.get("entries", 0) for d in docs),
            "errors": sum(d.get("errors", 0) for d in docs),
            "p99_ms": max((d.get("p99_ms", 0.0) for d in docs), default=0.0),
            "first_error": next((d["first_error"] for d in docs if d.get("first_error")), None),
        }

    def wait(self, timeout_s: float) -> list[dict]:
        end = time.monotonic() + timeout_s
        for proc in self.procs:
            try:
                proc.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for thread in self._threads:
            thread.join(5.0)
        for index, proc in enumerate(self.procs):
            if index not in self.results:
                raise BenchError(
                    f"load process {proc.pid} ended with code {proc.returncode} without a result"
                )
        return [self.results[i] for i in range(len(self.procs))]

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def load_specs(config: BenchConfig, url: str, ledger_ids: list[int], start_at: float) -> list[dict]:
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if parts.scheme not in ("http", "https"):
        raise BenchError(f"the gateway URL must be http:// or https://, got {url}")
    assignment = client_ledgers(ledger_ids, config.concurrency)
    procs = max(1, config.load_procs)
    specs = []
    for i in range(procs):
        mine = assignment[i::procs]
        specs.append(
            {
                "host": host,
                "port": port,
                "token": config.token,
                "tls": parts.scheme == "https",
                "ca_file": str(config.ca_file) if config.ca_file is not None else None,
                "client_ledgers": mine,
                "batch": config.batch,
                "entry_size": config.entry_size,
                "rate": config.rate * len(mine) / config.concurrency,
                "duration_s": config.duration_s,
                "warmup_s": config.warmup_s,
                "start_at": start_at,
                "stream": config.stream,
                "in_flight": config.in_flight,
            }
        )
    return specs
