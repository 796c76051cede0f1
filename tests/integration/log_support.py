"""Helpers of the log integration tests: a client of the Logs API over httpx, a reader
that reads a whole log, background appenders that record the outcome of every append,
and a tailing reader (docs/api.md, "Logs")."""

from __future__ import annotations

import base64
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx

from services.cluster.processes import default_verify
from tests.harness import wait_for

# A position as the tests compare it: (ledger id, entry id).
Pos = tuple[int, int]
# Outcomes of one append request.
ACKED = "acked"
NOT_WRITER = "not_writer"
UNKNOWN = "unknown"  # 5xx, 409 ledger_fenced, a connection error: may or may not be in


def pos(doc: dict[str, Any]) -> Pos:
    return (doc["ledger_id"], doc["entry_id"])


class LogClient:
    """One gateway's Logs API (a keep-alive client; not shared between threads)."""

    def __init__(self, url: str, timeout_s: float = 30.0) -> None:
        self.url = url
        self.http = httpx.Client(base_url=url, timeout=timeout_s, verify=default_verify())

    def close(self) -> None:
        self.http.close()

    def create(self, name: str) -> dict[str, Any]:
        r = self.http.put(f"/v1/logs/{name}")
        assert r.status_code in (200, 201), r.text
        doc: dict[str, Any] = r.json()
        return doc

    def show(self, name: str) -> dict[str, Any]:
        r = self.http.get(f"/v1/logs/{name}")
        assert r.status_code == 200, r.text
        doc: dict[str, Any] = r.json()
        return doc

    def take_writer(self, name: str) -> dict[str, Any]:
        r = self.http.post(f"/v1/logs/{name}/writer")
        assert r.status_code == 200, r.text
        doc: dict[str, Any] = r.json()
        return doc

    def roll(self, name: str) -> int:
        r = self.http.post(f"/v1/logs/{name}/roll")
        assert r.status_code == 200, r.text
        return int(r.json()["ledger_id"])

    def truncate(self, name: str, before: Pos) -> dict[str, Any]:
        r = self.http.post(
            f"/v1/logs/{name}/truncate", params={"before": f"{before[0]}:{before[1]}"}
        )
        assert r.status_code == 200, r.text
        doc: dict[str, Any] = r.json()
        return doc

    def append_raw(
        self, name: str, payloads: list[bytes], key: str | None = None, batch: bool = False
    ) -> httpx.Response:
        """One append request: a raw single record, or a JSON batch (also of one record
        when ``batch``)."""
        headers = {"Idempotency-Key": key} if key is not None else {}
        if len(payloads) == 1 and not batch:
            headers["Content-Type"] = "application/octet-stream"
            return self.http.post(f"/v1/logs/{name}/records", content=payloads[0], headers=headers)
        body = {"entries": [base64.b64encode(p).decode() for p in payloads]}
        return self.http.post(f"/v1/logs/{name}/records", json=body, headers=headers)

    def append(self, name: str, payloads: list[bytes], key: str | None = None) -> list[Pos]:
        """Append and expect success: the position of each record."""
        r = self.append_raw(name, payloads, key)
        assert r.status_code == 200, r.text
        return positions(r.json(), len(payloads))

    def read(
        self, name: str, start: str | None = None, limit: int = 1000, wait_ms: int = 0
    ) -> httpx.Response:
        params: dict[str, str | int] = {"limit": limit, "wait_ms": wait_ms}
        if start is not None:
            params["from"] = start
        return self.http.get(f"/v1/logs/{name}/records", params=params)

    def read_all(self, name: str) -> list[tuple[Pos, bytes]]:
        """Every record readable now, in log order, from the log's start."""
        out: list[tuple[Pos, bytes]] = []
        start: str | None = None
        for _ in range(10_000):
            r = self.read(name, start)
            assert r.status_code == 200, r.text
            doc = r.json()
            out += records_of(doc)
            start = doc["next"]
            if doc["caught_up"]:
                return out
        raise AssertionError("reading the log never caught up")

    def ledger_closed(self, ledger_id: int) -> bool:
        r = self.http.get(f"/v1/ledgers/{ledger_id}")
        assert r.status_code == 200, r.text
        return bool(r.json()["state"] == "CLOSED")

    def wait_closed(self, ledger_id: int, deadline_s: float = 10.0) -> None:
        """Wait until a rolled-out ledger is CLOSED (the roll closes it after its CAS)."""
        wait_for(lambda: self.ledger_closed(ledger_id), deadline_s, f"ledger {ledger_id} to close")

    def metrics(self) -> str:
        r = self.http.get("/metrics")
        assert r.status_code == 200, r.text
        return r.text


def positions(doc: dict[str, Any], count: int) -> list[Pos]:
    """The positions of an append's records (a batch lands in one ledger, in a row)."""
    if "position" in doc:
        assert count == 1, doc
        return [pos(doc["position"])]
    first, last = pos(doc["first_position"]), pos(doc["last_position"])
    assert first[0] == last[0] and last[1] - first[1] == count - 1, doc
    return [(first[0], first[1] + i) for i in range(count)]


def records_of(doc: dict[str, Any]) -> list[tuple[Pos, bytes]]:
    return [(pos(r["position"]), base64.b64decode(r["data"])) for r in doc["records"]]


def error_code(r: httpx.Response) -> str | None:
    try:
        code = r.json().get("error")
    except ValueError:
        return None
    return code if isinstance(code, str) else None


# ------------------------------------------------------------------ appenders


@dataclass
class Request:
    """One append request and what came of it."""

    payloads: list[bytes]
    key: str | None
    sent_at: float  # time.monotonic() when it was sent
    outcome: str = UNKNOWN
    positions: list[Pos] = field(default_factory=list)
    detail: str = ""


@dataclass
class Appenders:
    """``threads`` clients appending to log ``name`` through ``url`` until stopped, each
    alternating single records and batches of ``batch`` records with unique payloads
    (and an Idempotency-Key each when ``keys``). A thread ends at its first answer that
    is not a 200 or 409 not_writer (a dead gateway) or after ``not_writer_max`` answers
    409 not_writer. With ``await_move``, only the not_writer answers to requests sent after
    the test called ``role_moved`` count: the clients are sure to append after the test
    saw the role move, however fast they learnt it."""

    url: str
    name: str
    threads: int = 4
    batch: int = 3
    keys: bool = False
    not_writer_max: int = 3
    await_move: bool = False
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._moved_at: float | None = None
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(self.threads)
        ]

    def start(self) -> Appenders:
        for t in self._threads:
            t.start()
        return self

    @property
    def running(self) -> int:
        return sum(t.is_alive() for t in self._threads)

    def role_moved(self, at: float) -> None:
        """The writer role left this gateway at monotonic time ``at`` (``await_move``)."""
        self._moved_at = at

    def _counts(self, request: Request) -> bool:
        if not self.await_move:
            return True
        return self._moved_at is not None and request.sent_at > self._moved_at

    def stop(self, join_s: float = 60.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(join_s)
            assert not t.is_alive(), "an appender did not stop"

    def wait_done(self, deadline_s: float = 30.0) -> None:
        """Wait until every thread ended by itself."""
        wait_for(lambda: self.running == 0, deadline_s, "appender threads to end")

    def snapshot(self) -> list[Request]:
        with self._lock:
            return list(self.requests)

    def acked_records(self) -> int:
        return sum(len(r.payloads) for r in self.snapshot() if r.outcome == ACKED)

    def wait_acked(self, records: int, deadline_s: float = 30.0) -> None:
        wait_for(
            lambda: self.acked_records() >= records or self.running == 0,
            deadline_s,
            f"{records} acknowledged records",
        )
        assert self.acked_records() >= records, [r.detail for r in self.snapshot() if r.detail]

    def _run(self, thread: int) -> None:
        client = LogClient(self.url)
        not_writer = 0
        n = 0
        try:
            while not self._stop.is_set():
                count = 1 if n % 2 == 0 else self.batch
                payloads = [f"{self.name}-t{thread}-r{n}-{i}".encode() for i in range(count)]
                key = f"t{thread}-r{n}" if self.keys else None
                n += 1
                request = Request(payloads, key, time.monotonic())
                with self._lock:
                    self.requests.append(request)
                try:
                    r = client.append_raw(self.name, payloads, key)
                except httpx.HTTPError as exc:
                    request.detail = repr(exc)
                    return
                if r.status_code == 200:
                    request.positions = positions(r.json(), count)
                    request.outcome = ACKED
                    continue
                request.detail = f"{r.status_code} {r.text}"
                if r.status_code == 409 and error_code(r) == NOT_WRITER:
                    request.outcome = NOT_WRITER
                    not_writer += self._counts(request)
                    if not_writer >= self.not_writer_max:
                        return
                    continue
                return  # an unknown outcome: this client gives up (the test retries)
        finally:
            client.close()


# ------------------------------------------------------------------ readers


class Tailer:
    """Tails log ``name`` through ``url`` from its start with ``wait_ms`` long polls,
    following ``next`` (from ``start`` when given); a 400 invalid_argument (its
    position was truncated away) restarts it from the log's start. Records every record
    seen, in order."""

    def __init__(
        self, url: str, name: str, limit: int = 50, wait_ms: int = 1000, start: str | None = None
    ) -> None:
        self.url, self.name, self.limit, self.wait_ms = url, name, limit, wait_ms
        self.start_at = start
        self.seen: list[tuple[Pos, bytes]] = []
        self.restarts = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Tailer:
        self._thread.start()
        return self

    def snapshot(self) -> list[tuple[Pos, bytes]]:
        with self._lock:
            return list(self.seen)

    def has(self, position: Pos) -> bool:
        return any(p == position for p, _ in self.snapshot())

    def stop(self, join_s: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(join_s)
        assert not self._thread.is_alive(), "the tailer did not stop"

    def _run(self) -> None:
        client = LogClient(self.url, timeout_s=self.wait_ms / 1000 + 30)
        start = self.start_at
        try:
            while not self._stop.is_set():
                try:
                    r = client.read(self.name, start, self.limit, self.wait_ms)
                except httpx.HTTPError as exc:
                    self.errors.append(repr(exc))
                    return
                if r.status_code == 400 and error_code(r) == "invalid_argument":
                    self.restarts += 1
                    start = None
                    continue
                if r.status_code != 200:
                    self.errors.append(f"{r.status_code} {r.text}")
                    return
                doc = r.json()
                with self._lock:
                    self.seen += records_of(doc)
                start = doc["next"]
        finally:
            client.close()


def duplicates(items: Iterable[bytes]) -> list[bytes]:
    return [item for item, n in Counter(items).items() if n > 1]


def in_log_order(records: list[tuple[Pos, bytes]], ledgers: list[int]) -> bool:
    """Positions strictly increasing in log order (``ledgers``: the log's list)."""
    rank = {lid: i for i, lid in enumerate(ledgers)}
    keys = [(rank[p[0]], p[1]) for p, _ in records]
    return all(a < b for a, b in zip(keys, keys[1:], strict=False))


def metric(text: str, name: str, **labels: str) -> float:
    """One sample of Prometheus text by its labels in order (0 when absent)."""
    wanted = name + (
        "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else ""
    )
    for line in text.splitlines():
        if not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            if key == wanted:
                return float(value)
    return 0.0
