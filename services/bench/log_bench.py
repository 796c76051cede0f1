"""``quire bench --log``: append throughput and latency of a log, and the writer
hand-over time.

    quire bench --local --log                              # single records, rolls every 5 s
    quire bench --local --log --batch 100                  # batched appends
    quire bench --local --log --idempotency-keys           # a unique key per request
    quire bench --local --log --handover                   # + the hand-over time
    quire bench --local --log --forwarded                  # through a non-writer gateway

How it runs (after the cluster of ``services/bench/run.py``):

1. A fresh log (``bench-`` and a random suffix) is created with the bench's quorums
   and the gateway takes its writer role (waiting, like the ledger bench, until
   enough bookies are writable).
2. The load processes of ``services/bench/load.py`` (``LogLoad``) append to it for
   the warm-up and ``--duration``; meanwhile this process rolls the log every
   ``--roll-every-s`` (``POST .../roll``), so the counted window includes rolls.
   With ``--idempotency-keys`` every request carries a key of its own (what dedup
   costs; compare with a run without).
3. ``--handover``: ``--handover-reps`` times, the current writer is kept busy by a few
   appending threads while the other gateway (``--local`` starts a second one)
   takes the role; the time from sending its ``POST /writer`` to its first
   acknowledged append is one sample (median and max reported). The roles
   alternate, so each hand-over fences a busy writer.
4. The log is deleted (an existing gateway; ``--keep-ledgers`` keeps it).

The summary is the ledger bench's (``adds_per_s`` counts records) plus the log's
figures; the LAST stdout line stays one JSON object.
"""

from __future__ import annotations

import base64
import secrets
import statistics
import threading
import time
from typing import Any

from services.bench.config import BenchConfig, BenchError
from services.bench.limits import (
    HANDOVER_APPEND_DEADLINE_S,
    HANDOVER_BUSY_CLIENTS_MAX,
    HANDOVER_BUSY_WAIT_S,
    LOG_RETRY_DELAY_S,
    WRITABLE_WAIT_S,
)
from services.bench.window import measure, note
from services.cli.client import GatewayClient
from services.errors import NotEnoughBookies, NotWriter, QuireError, Unavailable

LOG_NAME_PREFIX = "bench-"
RAW = {"Content-Type": "application/octet-stream"}


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


# -- the log --------------------------------------------------------------------


def create_log(config: BenchConfig, url: str, name: str) -> dict[str, Any]:
    """Create ``name`` through ``url`` and take its writer role there; waits up to
    ``WRITABLE_WAIT_S`` until the gateway sees enough writable bookies."""
    body = {
        "ensemble_size": config.ensemble,
        "write_quorum": config.write_quorum,
        "ack_quorum": config.ack_quorum,
    }
    end = time.monotonic() + WRITABLE_WAIT_S
    with GatewayClient(url, config.token, ca_file=config.ca_file) as client:
        client.json("PUT", f"/v1/logs/{name}", json=body)
        while True:
            try:
                taken: dict[str, Any] = client.json("POST", f"/v1/logs/{name}/writer")
                return taken
            except NotEnoughBookies:
                if time.monotonic() > end:
                    raise
                time.sleep(LOG_RETRY_DELAY_S)


def delete_log(config: BenchConfig, url: str, name: str) -> None:
    try:
        with GatewayClient(url, config.token, ca_file=config.ca_file) as client:
            client.request("DELETE", f"/v1/logs/{name}")
    except QuireError as exc:
        note(f"quire bench: log {name} could not be deleted: {exc.code}: {exc.message}")


class Roller(threading.Thread):
    """Rolls the log every ``every_s`` while the load runs; times each roll."""

    def __init__(self, config: BenchConfig, url: str, name: str) -> None:
        super().__init__(daemon=True)
        self.client = GatewayClient(url, config.token, ca_file=config.ca_file)
        self.path = f"/v1/logs/{name}/roll"
        self.every_s = config.roll_every_s
        self.latencies_s: list[float] = []
        self.errors = 0
        self.first_error: str | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.every_s):
            started = time.perf_counter()
            try:
                self.client.json("POST", self.path)
            except QuireError as exc:
                self.errors += 1
                self.first_error = self.first_error or f"{exc.code}: {exc.message}"
                continue
            self.latencies_s.append(time.perf_counter() - started)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
        self.client.http.close()

    def summary(self) -> dict[str, Any]:
        done = sorted(self.latencies_s)
        out: dict[str, Any] = {
            "roll_every_s": self.every_s,
            "rolls": len(done),
            "roll_errors": self.errors,
            "roll_p50_ms": _ms(statistics.median(done)) if done else None,
            "roll_max_ms": _ms(done[-1]) if done else None,
        }
        if self.first_error:
            out["roll_first_error"] = self.first_error
        return out


# -- the hand-over -----------------------------------------------------------------


class Busy:
    """Threads that append to the log through one gateway back to back until that
    gateway answers ``not_writer`` (with ``--no-log-forwarding``) or they are stopped;
    once the role moved (``moved``), their acknowledged appends were forwarded to the new
    writer (``acked_after``)."""

    def __init__(self, config: BenchConfig, url: str, name: str, clients: int) -> None:
        self.config = config
        self.url = url
        self.path = f"/v1/logs/{name}/records"
        self.payload = secrets.token_bytes(config.entry_size)
        self.entries = [base64.b64encode(self.payload).decode()] * config.batch
        self.acked = 0
        self.moved = False
        self.acked_after = 0
        self.not_writer = 0
        self.errors = 0
        self.first_error: str | None = None
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(clients)]

    def start(self) -> Busy:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop_event.set()
        for thread in self._threads:
            thread.join()

    def _run(self) -> None:
        with GatewayClient(self.url, self.config.token, ca_file=self.config.ca_file) as client:
            while not self._stop_event.is_set():
                try:
                    if self.config.batch == 1:
                        client.json("POST", self.path, content=self.payload, headers=RAW)
                    else:
                        client.json("POST", self.path, json={"entries": self.entries})
                except NotWriter:
                    with self._lock:
                        self.not_writer += 1
                    return
                except QuireError as exc:
                    with self._lock:
                        self.errors += 1
                        self.first_error = self.first_error or f"{exc.code}: {exc.message}"
                    self._stop_event.wait(LOG_RETRY_DELAY_S)
                    continue
                with self._lock:
                    self.acked += 1
                    if self.moved:
                        self.acked_after += 1


def take_over(config: BenchConfig, url: str, name: str) -> tuple[float, float]:
    """``POST /writer`` on ``url``, then one record appended there until acknowledged:
    (seconds to the writer answer, seconds to the acknowledged append)."""
    with GatewayClient(url, config.token, ca_file=config.ca_file) as client:
        client.json("GET", f"/v1/logs/{name}")  # connected before the clock starts
        started = time.perf_counter()
        client.json("POST", f"/v1/logs/{name}/writer")
        writer_s = time.perf_counter() - started
        end = time.monotonic() + HANDOVER_APPEND_DEADLINE_S
        while True:
            try:
                client.json("POST", f"/v1/logs/{name}/records", content=b"handover", headers=RAW)
                return writer_s, time.perf_counter() - started
            except Unavailable:
                if time.monotonic() > end:
                    raise
                time.sleep(LOG_RETRY_DELAY_S / 10)


def handover(config: BenchConfig, first: str, second: str, name: str) -> dict[str, Any]:
    """``config.handover_reps`` hand-overs between the two gateways, each while the
    current writer is busy; ``first`` holds the role when it starts."""
    current, other = first, second
    total_s: list[float] = []
    writer_s: list[float] = []
    not_writer = errors = forwarded = 0
    first_error: str | None = None
    clients = min(config.concurrency, HANDOVER_BUSY_CLIENTS_MAX)
    for rep in range(config.handover_reps):
        busy = Busy(config, current, name, clients).start()
        try:
            end = time.monotonic() + HANDOVER_BUSY_WAIT_S
            while busy.acked < clients:
                if time.monotonic() > end:
                    raise BenchError(
                        f"hand-over {rep + 1}: the writer at {current} acknowledged no append "
                        f"in {HANDOVER_BUSY_WAIT_S:g}s ({busy.first_error})"
                    )
                time.sleep(0.01)
            w, t = take_over(config, other, name)
            busy.moved = True
            # The old writer's gateway goes on taking appends (forwarded), or its clients
            # were told not_writer (forwarding off there).
            end = time.monotonic() + HANDOVER_BUSY_WAIT_S
            while not busy.acked_after and busy.not_writer < clients:
                if time.monotonic() > end:
                    raise BenchError(
                        f"hand-over {rep + 1}: the old writer's gateway {current} took no "
                        f"append after it ({busy.first_error})"
                    )
                time.sleep(0.01)
        finally:
            busy.stop()
        writer_s.append(w)
        total_s.append(t)
        not_writer += busy.not_writer
        forwarded += busy.acked_after
        errors += busy.errors
        first_error = first_error or busy.first_error
        note(f"  hand-over {rep + 1}/{config.handover_reps}: {t * 1000:.1f} ms "
             f"(writer {w * 1000:.1f} ms) to {other}")  # fmt: skip
        current, other = other, current
    out: dict[str, Any] = {
        "handover_reps": len(total_s),
        "handover_ms_median": _ms(statistics.median(total_s)),
        "handover_ms_max": _ms(max(total_s)),
        "handover_writer_ms_median": _ms(statistics.median(writer_s)),
        "handover_ms": [_ms(t) for t in total_s],
        "handover_busy_clients": clients,
        "handover_busy_not_writer": not_writer,
        "handover_busy_forwarded": forwarded,
        "handover_busy_errors": errors,
    }
    if first_error:
        out["handover_first_error"] = first_error
    return out


# -- the run ------------------------------------------------------------------------


def run_log(
    config: BenchConfig,
    url: str,
    second: str | None,
    gateway_pid: int | None,
    bookie_pids: list[int],
) -> dict[str, Any]:
    """The log benchmark on a started cluster; the summary (the last line's JSON)."""
    name = LOG_NAME_PREFIX + secrets.token_hex(6)
    note(f"quire bench: creating log {name} on {url} (writer there)")
    created = False
    try:
        taken = create_log(config, url, name)
        created = True
        roller = Roller(config, url, name) if config.roll_every_s > 0 else None
        if roller is not None:
            roller.start()
        try:
            extra = {"log": name, "idempotency_keys": config.idempotency_keys,
                     "key_prefix": name}  # fmt: skip
            load_url = url
            if config.forwarded and second is not None:
                note(f"quire bench: appending through {second}, which forwards to {url}")
                load_url = second
            result = measure(
                config, load_url, [taken["ledger_id"]], gateway_pid, bookie_pids, extra
            )
        finally:
            if roller is not None:
                roller.stop()
        result.update(roller.summary() if roller is not None else {"rolls": 0})
        if config.handover and second is not None:
            note(f"quire bench: {config.handover_reps} writer hand-overs between {url} "
                 f"and {second}")  # fmt: skip
            result.update(handover(config, url, second, name))
        with GatewayClient(url, config.token, ca_file=config.ca_file) as client:
            result["ledgers"] = len(client.json("GET", f"/v1/logs/{name}")["ledgers"])
        result.update({"mode": "log", "log": name, "idempotency_keys": config.idempotency_keys,
                       "forwarded": config.forwarded})  # fmt: skip
        return result
    finally:
        if created and not config.local and not config.keep_ledgers:
            delete_log(config, url, name)
