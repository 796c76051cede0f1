"""The chaos run's workload: seeded clients, each a thread on the client's host,
recording every operation's invocation and outcome into the history
(tests/chaos/history.py).

- ``LedgerWriter``: creates ledgers through either gateway, adds single entries and
  batches, closes most of them; a ledger whose add did not succeed is left for the
  read-back to recover. The ``batcher`` is one too: batches of small ledgers, written
  at once and closed, for the auditor and the replicators to repair after faults.
- ``LogWriter``: appends to a log with an ``Idempotency-Key`` per append and settles
  every key: after an unknown outcome it retries the same key with the same records;
  on 409 ``not_writer`` it follows the role to the gateway that holds it, or takes the
  role (``POST /v1/logs/{name}/writer``, docs/api.md) where it is; after repeated
  unknowns or a refused connection it takes the role through the other gateway
  (docs/logs.md). Any gateway takes an append (it forwards to the writer's), so now and
  then (``MOVE_P`` of its appends) it also moves the role on purpose to another gateway,
  as a drain does, so hand-overs happen under the faults.
- ``LogStreamer``: appends to a log over the WebSocket stream (docs/streaming.md), a key
  per record; the records a broken stream left unacknowledged are settled by the
  ``LogWriter``'s REST retries with their keys.
- ``LogReader``: tails a log from its start through either gateway, each read going on
  from the last one's ``next``.
- ``LedgerReader``: reads a ledger the writers made, from its first entry, through
  either gateway.
- ``SparkReader`` (``Plan(spark=True)``): a Spark batch read of a log's last 20
  ledgers every 20 seconds, through the connector with both gateways.

Outcomes: a 2xx is ``ok``; a refused connection (nothing sent) and a clear refusal
(another 4xx) are ``fail``; a time-out or reset after the request was sent, 409
``ledger_fenced``, and any 5xx are ``unknown`` for a write (``fail`` for a read, which
changes nothing). Payloads are ASCII and unique: the writer's name, its sequence
number and seeded filler, so the checker can tell every record apart.
"""

from __future__ import annotations

import base64
import json
import random
import socket
import string
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from websockets.exceptions import ConnectionClosed, WebSocketException
from websockets.sync.client import ClientConnection, connect

from tests.chaos.history import FAIL, OK, UNKNOWN, History, Record
from tests.multihost.network import Host

# Ledger shapes (E, Qw, Qa) the writers draw from; all fit on three of five bookies.
# Qa < Qw leaves an acknowledged entry on Qa bookies when its other copies fail; the
# full audit after the ledger's close finds the gap and the replicators fill it.
SHAPES = ((3, 2, 2), (3, 3, 2), (2, 2, 2), (3, 2, 1))
# Those that keep every acknowledged entry through the loss of any one bookie's disk
# (Qa >= 2): a run with wipes has only these.
DURABLE_SHAPES = ((3, 2, 2), (3, 3, 2), (2, 2, 2), (3, 3, 3))
FILLER = string.ascii_letters + string.digits
# One call's time-out: longer than a gateway's own waits for a settled answer.
REQUEST_TIMEOUT_S = 8.0
# A log read's wait for new records (the call's time-out adds to it).
TAIL_WAIT_MS = 500
READ_LIMIT = 200
# A key unsettled for this long is given up (its outcome stays unknown); well within the
# gateways' idempotency window, so a late retry can never append it twice.
KEY_PATIENCE_S = 30.0
# Unknown outcomes in a row, on one gateway, before a log writer moves to the other.
UNKNOWNS_BEFORE_MOVING = 2
RETRY_PAUSE_S = 0.2
# A log writer moves its log's role to another gateway before this share of its appends.
MOVE_P = 0.03
STREAM_OPEN_TIMEOUT_S = 5.0
# A Spark reader's pace, and its patience with one job (the connector retries a
# gateway for up to 30 s, services/spark/limits.py).
SPARK_READ_EVERY_S = 20.0
SPARK_READ_LEDGERS = 20
SPARK_READ_DEADLINE_S = 180.0


def filler(rng: random.Random, low: int = 8, high: int = 160) -> str:
    return "".join(rng.choices(FILLER, k=rng.randint(low, high)))


def latin1(b64: str) -> str:
    """Bytes read back as text, one character per byte (exact for any bytes)."""
    return base64.b64decode(b64).decode("latin-1")


def b64(text: str) -> str:
    return base64.b64encode(text.encode("latin-1")).decode()


def position_text(position: Sequence[int]) -> str:
    return f"{position[0]}:{position[1]}"


def parse_position(text: str) -> list[int]:
    lid, eid = text.split(":")
    return [int(lid), int(eid)]


@dataclass
class Context:
    """What every worker shares: the history, the gateways by host name, the client's
    host, the stop signal, and the ledgers created (for the readers and the read-back)."""

    history: History
    gateways: dict[str, str]  # host name -> base URL
    client: Host
    stop: threading.Event = field(default_factory=threading.Event)
    ledgers: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_ledger(self, ledger_id: int) -> None:
        with self.lock:
            self.ledgers.append(ledger_id)

    def some_ledger(self, rng: random.Random) -> int | None:
        with self.lock:
            return rng.choice(self.ledgers[-50:]) if self.ledgers else None

    def address(self, gateway: str) -> str:
        return self.gateways[gateway].removeprefix("http://")

    def gateway_of(self, address: str) -> str | None:
        return next((g for g, url in self.gateways.items() if url.endswith(f"//{address}")), None)


@dataclass
class Answer:
    outcome: str
    result: dict[str, Any]
    body: Any = None


def send(http: httpx.Client, method: str, url: str, write: bool, **kw: Any) -> Answer:
    """One call, classified (module docstring): the outcome, what to record, the body."""
    try:
        r = http.request(method, url, **kw)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        return Answer(FAIL, {"error": "connect", "detail": type(exc).__name__})
    except httpx.HTTPError as exc:
        return Answer(UNKNOWN if write else FAIL, {"error": type(exc).__name__})
    if 200 <= r.status_code < 300:
        return Answer(OK, {}, r.json() if r.content else None)
    try:
        code = r.json().get("error", "")
    except ValueError:
        code = ""
    result = {"status": r.status_code, "error": code}
    if write and (r.status_code >= 500 or code == "ledger_fenced"):
        return Answer(UNKNOWN, result)
    return Answer(FAIL, result)


class Worker(threading.Thread):
    """A seeded client thread; ``op`` records one operation around a call."""

    def __init__(self, name: str, ctx: Context, seed: int):
        super().__init__(name=name, daemon=True)
        self.ctx = ctx
        self.rng = random.Random(seed)
        self.http = ctx.client.http_client(timeout_s=REQUEST_TIMEOUT_S)
        self.error: BaseException | None = None

    @property
    def gateways(self) -> list[str]:
        return sorted(self.ctx.gateways)

    def url(self, gateway: str, path: str) -> str:
        return self.ctx.gateways[gateway] + path

    def op(self, f: str, value: dict[str, Any], call: Callable[[], Answer]) -> Answer:
        invocation = self.ctx.history.invoke(self.name, f, value)
        try:
            answer = call()
        except Exception as exc:  # recorded as unknown; a bug of the suite shows in `error`
            answer = Answer(UNKNOWN, {"error": repr(exc)})
        self.ctx.history.complete(invocation, answer.outcome, answer.result)
        return answer

    def pause(self, seconds: float) -> bool:
        """Sleep unless stopped; True once the run is over."""
        return self.ctx.stop.wait(seconds)

    def run(self) -> None:
        try:
            while not self.ctx.stop.is_set():
                self.step()
        except BaseException as exc:
            self.error = exc
            raise
        finally:
            self.http.close()

    def step(self) -> None:
        raise NotImplementedError


class LedgerWriter(Worker):
    """Creates a ledger, adds ``adds`` times (single entries, or batches with
    probability ``batch_p``), closes it with probability ``close_p``, pauses, again."""

    def __init__(
        self,
        name: str,
        ctx: Context,
        seed: int,
        adds: tuple[int, int] = (3, 30),
        batch_p: float = 0.2,
        batch: tuple[int, int] = (2, 5),
        close_p: float = 0.7,
        pause_s: float = 0.0,
        ledgers_per_step: int = 1,
        shapes: tuple[tuple[int, int, int], ...] = SHAPES,
    ):
        super().__init__(name, ctx, seed)
        self.shapes = shapes
        self.adds, self.batch_p, self.batch = adds, batch_p, batch
        self.close_p, self.pause_s, self.ledgers_per_step = close_p, pause_s, ledgers_per_step
        self.sequence = 0

    def step(self) -> None:
        for _ in range(self.ledgers_per_step):
            self.one_ledger()
        self.pause(self.pause_s)

    def one_ledger(self) -> None:
        gateway = self.rng.choice(self.gateways)
        e, qw, qa = self.rng.choice(self.shapes)
        shape = {"ensemble_size": e, "write_quorum": qw, "ack_quorum": qa}
        created = self.op(
            "ledger_create",
            {"gateway": gateway, **shape},
            lambda: self._created(
                send(self.http, "POST", self.url(gateway, "/v1/ledgers"), True, json=shape)
            ),
        )
        if created.outcome != OK:
            self.pause(RETRY_PAUSE_S)
            return
        lid = created.result["ledger_id"]
        self.ctx.add_ledger(lid)
        for _ in range(self.rng.randint(*self.adds)):
            if self.ctx.stop.is_set() or not self.add(gateway, lid):
                return
        if self.rng.random() < self.close_p:
            path = f"/v1/ledgers/{lid}/close"
            self.op(
                "ledger_close",
                {"gateway": gateway, "ledger_id": lid},
                lambda: self._closed(send(self.http, "POST", self.url(gateway, path), True)),
            )

    def add(self, gateway: str, lid: int) -> bool:
        count = self.rng.randint(*self.batch) if self.rng.random() < self.batch_p else 1
        entries = []
        for _ in range(count):
            entries.append(f"{self.name}:{lid}:{self.sequence}:{filler(self.rng)}")
            self.sequence += 1
        url = self.url(gateway, f"/v1/ledgers/{lid}/entries")

        def call() -> Answer:
            if count == 1:
                answer = send(self.http, "POST", url, True, content=entries[0].encode())
            else:
                body = {"entries": [b64(e) for e in entries]}
                answer = send(self.http, "POST", url, True, json=body)
            if answer.outcome == OK:
                first = answer.body.get("first_entry_id", answer.body.get("entry_id"))
                answer.result = {"first_entry_id": first}
            return answer

        value = {"gateway": gateway, "ledger_id": lid, "entries": entries}
        return self.op("ledger_add", value, call).outcome == OK

    @staticmethod
    def _created(answer: Answer) -> Answer:
        if answer.outcome == OK:
            answer.result = {"ledger_id": answer.body["ledger_id"]}
        return answer

    @staticmethod
    def _closed(answer: Answer) -> Answer:
        if answer.outcome == OK:
            answer.result = {"last_entry_id": answer.body["last_entry_id"]}
        return answer


class LogWriter(Worker):
    """Appends to ``log`` with a key per append (a batch of 2-4 records with
    probability ``batch_p``) and settles each key before the next (module docstring)."""

    def __init__(
        self, name: str, ctx: Context, seed: int, log: str, gateway: str, batch_p: float = 0.2
    ):
        super().__init__(name, ctx, seed)
        self.log, self.gateway, self.batch_p = log, gateway, batch_p
        self.sequence = 0

    def other_gateway(self) -> str:
        others = [g for g in self.gateways if g != self.gateway]
        return self.rng.choice(others) if others else self.gateway

    def next_key(self) -> tuple[str, list[str]]:
        key = f"{self.name}-{self.sequence}"
        self.sequence += 1
        count = self.rng.randint(2, 4) if self.rng.random() < self.batch_p else 1
        return key, [f"{key}/{j}:{filler(self.rng)}" for j in range(count)]

    def step(self) -> None:
        if self.rng.random() < MOVE_P:
            self.gateway = self.other_gateway()
            self.take_writer()
        key, records = self.next_key()
        self.settle(key, records)

    def settle(self, key: str, records: list[str], via: str = "rest") -> bool:
        """Append ``records`` under ``key`` until acknowledged, refused for good, or
        ``KEY_PATIENCE_S`` passed (then the outcome stays unknown). True if acknowledged."""
        deadline = time.monotonic() + KEY_PATIENCE_S
        unknowns = 0
        while time.monotonic() < deadline and not self.ctx.stop.is_set():
            answer = self.append(key, records)
            if answer.outcome == OK:
                return True
            error = answer.result.get("error")
            if answer.outcome == FAIL:
                unknowns = 0
                if error == "not_writer":
                    self.follow_writer()
                elif error == "connect":
                    self.gateway = self.other_gateway()
                    self.take_writer()
                else:
                    return False  # a refusal for good: log_not_found, a reused key…
            else:
                unknowns += 1
                if error != "ledger_fenced" and unknowns >= UNKNOWNS_BEFORE_MOVING:
                    unknowns = 0
                    self.gateway = self.other_gateway()
                    self.take_writer()
            self.pause(RETRY_PAUSE_S * self.rng.uniform(0.5, 1.5))
        return False

    def append(self, key: str, records: list[str]) -> Answer:
        gateway = self.gateway
        url = self.url(gateway, f"/v1/logs/{self.log}/records")
        headers = {"Idempotency-Key": key}

        def call() -> Answer:
            if len(records) == 1:
                answer = send(
                    self.http, "POST", url, True, content=records[0].encode(), headers=headers
                )
            else:
                body = {"entries": [b64(r) for r in records]}
                answer = send(self.http, "POST", url, True, json=body, headers=headers)
            if answer.outcome == OK:
                doc = answer.body
                first = doc.get("first_position", doc.get("position"))
                last = doc.get("last_position", doc.get("position"))
                answer.result = {
                    "first": [first["ledger_id"], first["entry_id"]],
                    "last": [last["ledger_id"], last["entry_id"]],
                }
            return answer

        value = {"gateway": gateway, "log": self.log, "key": key, "records": records}
        return self.op("log_append", value, call)

    def follow_writer(self) -> None:
        """After ``not_writer``: go where the role is, or take it here."""
        answer = send(self.http, "GET", self.url(self.gateway, f"/v1/logs/{self.log}"), False)
        writer = (answer.body or {}).get("writer") if answer.outcome == OK else None
        holder = self.ctx.gateway_of(writer["gateway"]) if writer else None
        if holder is not None and holder != self.gateway:
            self.gateway = holder
        else:
            self.take_writer()

    def take_writer(self) -> Answer:
        gateway = self.gateway
        url = self.url(gateway, f"/v1/logs/{self.log}/writer")

        def call() -> Answer:
            answer = send(self.http, "POST", url, True)
            if answer.outcome == OK:
                answer.result = {
                    "epoch": answer.body["epoch"],
                    "ledger_id": answer.body["ledger_id"],
                }
            return answer

        return self.op("log_writer", {"gateway": gateway, "log": self.log}, call)


class LogStreamer(LogWriter):
    """Appends to ``log`` over WebSocket streams: a stream of 5-20 keyed records at a
    time; the records it left unacknowledged are settled over REST with their keys."""

    def step(self) -> None:
        pending = [self.next_key() for _ in range(self.rng.randint(5, 20))]
        pending = [(key, records[:1]) for key, records in pending]  # one record per key
        unsettled = self.stream(pending)
        for key, records in unsettled:
            self.settle(key, records)
        self.pause(0.1)

    def stream(self, pending: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
        """Send ``pending`` over one stream; what was not acknowledged. Each record is
        one ``log_append`` operation (``via: stream``), from its send to its ack."""
        gateway = self.gateway
        try:
            conn = self.open(gateway)
        except (OSError, WebSocketException, TimeoutError):
            self.gateway = self.other_gateway()
            self.take_writer()
            return pending
        invocations: list[Record] = []
        acked = 0
        with conn:
            try:
                credits = json.loads(conn.recv(timeout=REQUEST_TIMEOUT_S)).get("credits", 0)
                for key, records in pending[: max(0, credits)]:
                    value = {
                        "gateway": gateway,
                        "log": self.log,
                        "key": key,
                        "records": records,
                        "via": "stream",
                    }
                    invocations.append(self.ctx.history.invoke(self.name, "log_append", value))
                    conn.send(json.dumps({"key": key}))
                    conn.send(records[0].encode())
                conn.send(json.dumps({"end": True}))
                while acked < len(invocations):
                    doc = json.loads(conn.recv(timeout=REQUEST_TIMEOUT_S))
                    if "error" in doc:
                        if doc["error"] == "not_writer":
                            self.follow_writer()
                        break
                    if "seq" in doc:
                        position = [doc["position"]["ledger_id"], doc["position"]["entry_id"]]
                        self.ctx.history.complete(
                            invocations[doc["seq"]], OK, {"first": position, "last": position}
                        )
                        acked += 1
            except (ConnectionClosed, OSError, WebSocketException, TimeoutError, ValueError):
                pass  # the stream broke: what it did not acknowledge is settled over REST
        for invocation in invocations[acked:]:
            self.ctx.history.complete(invocation, UNKNOWN, {"error": "stream ended"})
        return pending[acked:]

    def open(self, gateway: str) -> ClientConnection:
        host, port = self.ctx.address(gateway).split(":")
        sock = self.ctx.client.socket()
        try:
            sock.settimeout(STREAM_OPEN_TIMEOUT_S)
            sock.connect((self.ctx.client.network.resolve(host), int(port)))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return connect(
                f"ws://{host}:{port}/v1/logs/{self.log}/stream",
                sock=sock,
                open_timeout=STREAM_OPEN_TIMEOUT_S,
                close_timeout=1,
                max_size=None,
                proxy=None,
                compression=None,
            )
        except BaseException:
            sock.close()
            raise


class LogReader(Worker):
    """Tails ``log`` from its start, each read from the last one's ``next``."""

    def __init__(self, name: str, ctx: Context, seed: int, log: str):
        super().__init__(name, ctx, seed)
        self.log = log
        self.next: str | None = None

    def step(self) -> None:
        gateway = self.rng.choice(self.gateways)
        params: dict[str, Any] = {"limit": READ_LIMIT, "wait_ms": TAIL_WAIT_MS}
        if self.next is not None:
            params["from"] = self.next
        url = self.url(gateway, f"/v1/logs/{self.log}/records")

        def call() -> Answer:
            answer = send(self.http, "GET", url, False, params=params)
            if answer.outcome == OK:
                doc = answer.body
                answer.result = {
                    "records": [
                        [r["position"]["ledger_id"], r["position"]["entry_id"], latin1(r["data"])]
                        for r in doc["records"]
                    ],
                    "next": doc["next"],
                }
            return answer

        answer = self.op("log_read", {"gateway": gateway, "log": self.log, "from": self.next}, call)
        if answer.outcome == OK:
            self.next = answer.result["next"] or self.next
        else:
            self.pause(RETRY_PAUSE_S)


class LedgerReader(Worker):
    """Reads a recent ledger of the writers from its first entry (one page)."""

    def step(self) -> None:
        lid = self.ctx.some_ledger(self.rng)
        if lid is None:
            self.pause(RETRY_PAUSE_S)
            return
        gateway = self.rng.choice(self.gateways)
        url = self.url(gateway, f"/v1/ledgers/{lid}/entries")

        def call() -> Answer:
            answer = send(self.http, "GET", url, False)
            if answer.outcome == OK:
                answer.result = {
                    "entries": [[e["entry_id"], latin1(e["data"])] for e in answer.body["entries"]]
                }
            return answer

        self.op("ledger_read", {"gateway": gateway, "ledger_id": lid}, call)
        self.pause(0.2)


class SparkDriverLike(Protocol):
    """What a Spark reader asks (``tests.multihost.spark_hosts.SparkDriver``)."""

    def call(self, op: str, deadline_s: float, **fields: Any) -> dict[str, Any]: ...


class SparkReader(Worker):
    """Every ``SPARK_READ_EVERY_S``, a Spark batch read of one log's last
    ``SPARK_READ_LEDGERS`` ledgers, from the first entry of the first, through the
    connector (both gateways, tests/multihost/spark_driver.py): what it returns must be
    the log's one order from there on, as for any reader."""

    def __init__(
        self, name: str, ctx: Context, seed: int, driver: SparkDriverLike, logs: list[str]
    ) -> None:
        super().__init__(name, ctx, seed)
        self.driver = driver
        self.logs = logs

    def step(self) -> None:
        if self.pause(SPARK_READ_EVERY_S):
            return
        log = self.rng.choice(self.logs)
        gateway = self.rng.choice(self.gateways)
        listed = send(self.http, "GET", self.url(gateway, f"/v1/logs/{log}"), False)
        if listed.outcome != OK or not listed.body["ledgers"]:
            return
        ledgers = listed.body["ledgers"]
        start = f"{ledgers[max(0, len(ledgers) - SPARK_READ_LEDGERS)]}:0"

        def call() -> Answer:
            try:
                done = self.driver.call("read", SPARK_READ_DEADLINE_S, log=log, start=start)
            except AssertionError as exc:  # the job failed: the connector gave up
                return Answer(FAIL, {"error": str(exc).splitlines()[0][:300]})
            return Answer(OK, {"records": done["records"], "next": None})

        self.op("log_read", {"gateway": "spark", "log": log, "start": start}, call)


@dataclass(frozen=True)
class Plan:
    """How many of each client a run has."""

    ledger_writers: int = 2
    logs: int = 2
    log_writers_per_log: int = 2
    log_readers_per_log: int = 1
    ledger_readers: int = 1
    batchers: int = 1
    streamers: int = 1
    shapes: tuple[tuple[int, int, int], ...] = SHAPES
    # Spark batch reads of the logs (a master, a worker and a driver on hosts of their
    # own: minutes of JVM start and two cores' work, so the long runs only).
    spark: bool = False

    @property
    def durable(self) -> bool:
        """Whether every ledger survives the loss of any one bookie's disk (Qa >= 2 for
        every shape; a log's ledgers are 3, 2, 2): then the run may wipe bookies."""
        return all(qa >= 2 for _, _, qa in self.shapes)

    def log_names(self) -> list[str]:
        return [f"chaos-{n}" for n in range(self.logs)]

    def stream_logs(self) -> list[str]:
        return [f"chaos-stream-{n}" for n in range(self.streamers)]


def workers(
    ctx: Context, seed: int, plan: Plan, spark: SparkDriverLike | None = None
) -> list[Worker]:
    """The run's clients, each seeded from ``seed`` and its place; a Spark reader when
    ``spark`` is given."""
    gateways = sorted(ctx.gateways)
    out: list[Worker] = []
    seeds = random.Random(seed)

    def next_seed() -> int:
        return seeds.randrange(2**32)

    for n in range(plan.ledger_writers):
        out.append(LedgerWriter(f"ledger-writer-{n}", ctx, next_seed(), shapes=plan.shapes))
    for n in range(plan.batchers):
        out.append(
            LedgerWriter(
                f"batcher-{n}",
                ctx,
                next_seed(),
                adds=(1, 1),
                batch_p=1.0,
                batch=(5, 20),
                close_p=1.0,
                pause_s=2.0,
                ledgers_per_step=3,
                shapes=plan.shapes,
            )
        )
    for log in plan.log_names():
        for n in range(plan.log_writers_per_log):
            name = f"log-writer-{log}-{n}"
            out.append(LogWriter(name, ctx, next_seed(), log, gateways[n % len(gateways)]))
        for n in range(plan.log_readers_per_log):
            out.append(LogReader(f"log-reader-{log}-{n}", ctx, next_seed(), log))
    for n, log in enumerate(plan.stream_logs()):
        out.append(LogStreamer(f"streamer-{n}", ctx, next_seed(), log, gateways[0]))
        out.append(LogReader(f"log-reader-{log}", ctx, next_seed(), log))
    for n in range(plan.ledger_readers):
        out.append(LedgerReader(f"ledger-reader-{n}", ctx, next_seed()))
    if spark is not None:
        logs = [*plan.log_names(), *plan.stream_logs()]
        out.append(SparkReader("spark-reader", ctx, next_seed(), spark, logs))
    return out
