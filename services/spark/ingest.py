"""The write side of the Spark connector, without Spark: task ledgers and commits.

A write task (``write_task``) makes ONE ledger of its own for the log, with custom
metadata ``quire.log`` (the log), ``quire.job`` (the job or micro-batch) and
``quire.task`` (``<partition>.<attempt>``), appends its records in the log's record
envelope (``log_records.encode``, one envelope batch per request, so readers see each
request whole), closes it, and deletes it when anything fails. The driver then attaches
every task's ledger, in partition order, to the log in ONE call (``POST
/v1/logs/{name}/ledgers``; ``attach``), or deletes them all (``discard``).

Requests hold at most ``REQUEST_RECORDS_MAX`` records and ``REQUEST_PAYLOAD_MAX_BYTES``
of stored entries (``split_requests``). Every call but an append is sent again when its
outcome is unknown (no answer, 503/504; ``client.py``): an attach that landed is
recognised by the gateway, which answers it as committed, and a ledger created twice
carries the job's tag, so the job's commit deletes it. An append is never sent twice:
its records could land twice, so the task fails and Spark runs it again (its ledger
deleted). Nothing here deletes a ledger a log lists: the gateway refuses (409
``ledger_in_log``) and that ledger is left.

Every failure raises ``QuireSparkError`` (the connector's one error, ``client.py``), whose
text says what the gateway said, so a failed
Spark job explains itself.
"""

from __future__ import annotations

import base64
import logging
import re
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from services.limits import ENTRY_SIZE_MAX_BYTES
from services.protocol import log_records
from services.spark import limits
from services.spark.client import QuireSparkError, SparkGatewayClient, TlsOptions, gateway_list
from services.spark.options import tls_options

# The largest record a task writes: a stored entry (record + envelope head) must stay
# within the ledger API's entry bound.
RECORD_SIZE_MAX_BYTES = ENTRY_SIZE_MAX_BYTES - log_records.envelope_size(1, None)
# Custom metadata keys of a task ledger.
LOG_KEY, JOB_KEY, TASK_KEY = "quire.log", "quire.job", "quire.task"
# The gateway's refusal to delete a ledger that a log lists.
IN_LOG = "ledger_in_log"
_COMMIT_ID = re.compile(r"[A-Za-z0-9._:-]{1,200}")

log = logging.getLogger(__name__)


def _option_error(message: str) -> QuireSparkError:
    return QuireSparkError("invalid_option", message)


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """The options of a write (``df.write.format("quire").option(...)``)."""

    gateway: str  # one URL or several separated by commas (client.py)
    log: str
    token: str | None = None
    ledger: Mapping[str, int] | None = None  # ensemble_size / write_quorum / ack_quorum
    request_records: int = limits.REQUEST_RECORDS_MAX  # records per append request
    tls: TlsOptions = TlsOptions()  # caFile, certFile, keyFile (options.tls_options)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        gateway, log = opts.get("gateway", "").strip(), opts.get("log", "").strip()
        if not gateway_list(gateway):
            raise _option_error('option "gateway" (the gateway URL) is required')
        if not log:
            raise _option_error('option "log" (the log to write) is required')
        if "ledgers" in opts:
            raise _option_error('option "ledgers" is for reads; a write goes to a "log"')
        if "password" in opts:
            raise _option_error("a log's ledgers have no password: drop the password option")
        ledger: dict[str, int] = {}
        for key in ("ensemble_size", "write_quorum", "ack_quorum"):
            if key in opts:
                try:
                    ledger[key] = int(opts[key])
                except ValueError:
                    raise _option_error(f"option {key!r} must be an integer") from None
        request_records = limits.REQUEST_RECORDS_MAX
        if "request_records" in opts:
            try:
                request_records = int(opts["request_records"])
            except ValueError:
                request_records = 0
            if not 1 <= request_records <= limits.REQUEST_RECORDS_MAX:
                raise _option_error(f"option request_records: 1 to {limits.REQUEST_RECORDS_MAX}")
        urls = [url if "://" in url else "http://" + url for url in gateway_list(gateway)]
        token = opts.get("token") or None
        tls = tls_options(options)
        return cls(",".join(urls), log, token, ledger or None, request_records, tls)


# ------------------------------------------------------------------ pure parts


def as_payload(value: object) -> bytes:
    """A row's ``data``: bytes as they are, a string as UTF-8."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if value is None:
        raise QuireSparkError("invalid_record", "a row's data is null")
    raise QuireSparkError("invalid_record", f"data must be binary or string, not {type(value)}")


def split_requests(
    payloads: Iterable[bytes],
    records_max: int = limits.REQUEST_RECORDS_MAX,
    bytes_max: int = limits.REQUEST_PAYLOAD_MAX_BYTES,
) -> Iterator[list[bytes]]:
    """The records in order, cut into requests of at most ``records_max`` records and
    ``bytes_max`` stored bytes (each record with its envelope); a request holds at
    least one record. A record over ``RECORD_SIZE_MAX_BYTES`` is refused."""
    batch: list[bytes] = []
    size = 0
    for payload in payloads:
        if len(payload) > RECORD_SIZE_MAX_BYTES:
            raise QuireSparkError(
                "payload_too_large",
                f"a record of {len(payload)} bytes is over {RECORD_SIZE_MAX_BYTES}",
            )
        stored = len(payload) + log_records.ENVELOPE_MAX_BYTES
        if batch and (len(batch) >= records_max or size + stored > bytes_max):
            yield batch
            batch, size = [], 0
        batch.append(payload)
        size += stored
    if batch:
        yield batch


def request_body(payloads: Sequence[bytes], time_ms: int) -> dict[str, list[str]]:
    """The JSON batch of one append request: the records as ONE envelope batch."""
    entries = log_records.encode(payloads, time_ms)
    return {"entries": [base64.b64encode(entry).decode("ascii") for entry in entries]}


def task_metadata(log: str, job: str, partition: int, attempt: int) -> dict[str, str]:
    return {LOG_KEY: log, JOB_KEY: job, TASK_KEY: f"{partition}.{attempt}"}


class TaskLedger(Protocol):
    """What a write task hands to the driver (its commit message): its partition and
    ledger (None when the partition had no rows)."""

    @property
    def partition_id(self) -> int: ...

    @property
    def ledger_id(self) -> int | None: ...


def ledger_order(messages: Iterable[TaskLedger | None]) -> list[int]:
    """The ledgers to attach, in partition order (one per partition: a repeated
    partition keeps its first message; empty partitions add nothing)."""
    by_partition: dict[int, int] = {}
    for message in messages:
        if message is None or message.ledger_id is None:
            continue
        by_partition.setdefault(message.partition_id, message.ledger_id)
    return [by_partition[p] for p in sorted(by_partition)]


def all_ledgers(messages: Iterable[TaskLedger | None]) -> list[int]:
    """Every ledger named in the messages (what an abort deletes)."""
    return [m.ledger_id for m in messages if m is not None and m.ledger_id is not None]


def check_commit_id(commit_id: str) -> str:
    if _COMMIT_ID.fullmatch(commit_id) is None:
        raise _option_error(f"commit_id {commit_id!r}: 1-200 characters of A-Za-z0-9._:-")
    return commit_id


def new_job_id() -> str:
    return f"spark-{uuid.uuid4().hex}"


# ------------------------------------------------------------------ the gateway


class IngestClient:
    """The calls a write makes, synchronously, on one gateway (with the token)."""

    def __init__(
        self,
        options: WriteOptions,
        timeout_s: float = limits.WRITE_REQUEST_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.options = options
        self.gateway = SparkGatewayClient(
            options.gateway, options.token, timeout_s, transport, options.tls
        )

    def __enter__(self) -> IngestClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.gateway.close()

    def call(
        self,
        method: str,
        path: str,
        ok: tuple[int, ...] = (200,),
        repeatable: bool = True,
        **kw: Any,
    ) -> Any:
        """One JSON call: its answer (None for 204), or ``QuireSparkError``; sent again
        when its outcome is unknown unless not ``repeatable``."""
        return self.gateway.request(method, path, ok=ok, repeatable=repeatable, **kw)

    @property
    def log_path(self) -> str:
        return f"/v1/logs/{self.options.log}"

    # ------------------------------------------------------------ task side

    def create_ledger(self, metadata: Mapping[str, str]) -> int:
        body: dict[str, Any] = {"metadata": dict(metadata), **(self.options.ledger or {})}
        doc = self.call("POST", "/v1/ledgers", ok=(201,), json=body)
        return int(doc["ledger_id"])

    def append(self, ledger_id: int, payloads: Sequence[bytes]) -> None:
        body = request_body(payloads, int(time.time() * 1000))
        self.call("POST", f"/v1/ledgers/{ledger_id}/entries", repeatable=False, json=body)

    def close_ledger(self, ledger_id: int) -> None:
        self.call("POST", f"/v1/ledgers/{ledger_id}/close")

    def delete_ledgers(self, ledger_ids: Iterable[int]) -> None:
        """Delete each ledger (one already gone is fine; one a log lists is left: the
        gateway refuses with 409 ``ledger_in_log``, e.g. an attach that landed after
        all); the first failure is raised after trying them all."""
        failure: QuireSparkError | None = None
        for ledger_id in ledger_ids:
            try:
                self.call("DELETE", f"/v1/ledgers/{ledger_id}", ok=(204, 404))
            except QuireSparkError as exc:
                if exc.code == IN_LOG:
                    continue
                failure = failure or exc
        if failure is not None:
            raise failure

    # ------------------------------------------------------------ driver side

    def ensure_log(self) -> dict[str, Any]:
        """The log, created when missing (PUT: 201 new, 200 there already)."""
        doc: dict[str, Any] = self.call("PUT", self.log_path, ok=(200, 201))
        return doc

    def attach(self, ledger_ids: Sequence[int], commit: tuple[str, int] | None = None) -> bool:
        """Attach ``ledger_ids`` (in order) to the log in one CAS; with ``commit`` (id,
        sequence) exactly once. True: they are in the log now; False: the commit was
        recorded before with other ledgers (the caller deletes its own). An unknown
        outcome (no answer, a 503/504) is settled by the client sending the same attach
        again, to this gateway or another: the gateway answers True when these ledgers
        are in the log already (an attempt whose answer was lost landed), so no separate
        read of the log can race a late write."""
        body: dict[str, Any] = {"ledgers": list(ledger_ids)}
        if commit is not None:
            body["commit"] = {"id": commit[0], "sequence": commit[1]}
        doc = self.call("POST", f"{self.log_path}/ledgers", json=body)
        return bool(doc["committed"])

    def commit(
        self, ledger_ids: Sequence[int], others: Sequence[int], commit: tuple[str, int] | None
    ) -> bool:
        """Attach ``ledger_ids`` (with ``commit``), then delete ``others`` (ledgers of the
        job no message named) and, when the commit was recorded before, ``ledger_ids``
        too. Once the attach answered the deletes are best effort (``delete_left_over``):
        failing a job whose records are in the log would make its user run it again and
        write them twice, while a ledger left over is in no log."""
        attached = self.attach(ledger_ids, commit) if ledger_ids else True
        self.delete_left_over(list(others) if attached else [*others, *ledger_ids])
        return attached

    def delete_left_over(self, ledger_ids: Sequence[int]) -> None:
        """``delete_ledgers`` after a commit answered: a failure is logged, not raised."""
        try:
            self.delete_ledgers(ledger_ids)
        except QuireSparkError as exc:
            log.warning("could not delete %d ledgers after a commit: %s", len(ledger_ids), exc)

    def discard(self, ledger_ids: Sequence[int]) -> None:
        """Delete the ledgers of an aborted commit, except any that a log lists (an
        attach that landed after all: the gateway refuses to delete it)."""
        self.delete_ledgers(ledger_ids)

    def ledger_mark(self) -> int:
        """An id below every ledger made from now on (ids only grow): a ledger made and
        deleted at once. A job's task ledgers are then found by scanning the ids above
        it, not the whole cluster (``job_ledgers``)."""
        ledger_id = self.create_ledger({JOB_KEY: "mark"})
        self.delete_ledgers([ledger_id])
        return ledger_id

    def query_mark(self, job: str) -> int | None:
        """For a micro-batch of streaming query ``job``: an id below every ledger its
        tasks made, the last ledger the log lists of an earlier batch of the query
        (micro-batches run one after another, so a batch's tasks make their ledgers
        after the previous batch's commit, and ids only grow). None when none is among
        the log's last ``QUERY_MARK_LOOK_BACK_MAX`` ledgers (the query's first batch)."""
        doc = self.call("GET", self.log_path)
        for ledger_id in reversed(doc["ledgers"][-limits.QUERY_MARK_LOOK_BACK_MAX :]):
            try:
                meta = self.call("GET", f"/v1/ledgers/{ledger_id}")
            except QuireSparkError as exc:
                if exc.status == 404:
                    continue
                raise
            if (meta.get("metadata") or {}).get(JOB_KEY) == job:
                return int(ledger_id)
        return None

    def job_ledgers(self, job: str, after: int | None = None) -> list[int]:
        """Every ledger a task of ``job`` made (custom metadata ``quire.job``) above id
        ``after`` (``ledger_mark``; None: all ledgers): for a commit or an abort that
        does not know them all (a task attempt that lost to a speculative copy or a retry
        sends no message; a task that died before it could delete its own)."""
        found: list[int] = []
        while True:
            params = (
                {"limit": limits.LIST_PAGE_LEDGERS}
                if after is None
                else {"limit": limits.LIST_PAGE_LEDGERS, "after": after}
            )
            page = self.call("GET", "/v1/ledgers", params=params)
            for ledger_id in page["ledgers"]:
                try:
                    meta = self.call("GET", f"/v1/ledgers/{ledger_id}")
                except QuireSparkError as exc:
                    if exc.status == 404:
                        continue
                    raise
                custom = meta.get("metadata") or {}
                if custom.get(JOB_KEY) == job and custom.get(LOG_KEY) == self.options.log:
                    found.append(int(ledger_id))
            if page.get("next") is None:
                return found
            after = int(page["next"])


# ------------------------------------------------------------------ one task


def write_task(
    options: WriteOptions, job: str, partition: int, attempt: int, payloads: Iterable[bytes]
) -> int | None:
    """Write one task's records into a ledger of its own and close it; the ledger is
    deleted when anything fails (the records' iterator raising included). A partition
    without records makes no ledger (None)."""
    ledger_id: int | None = None
    with IngestClient(options) as client:
        try:
            for request in split_requests(payloads, options.request_records):
                if ledger_id is None:
                    meta = task_metadata(options.log, job, partition, attempt)
                    ledger_id = client.create_ledger(meta)
                client.append(ledger_id, request)
            if ledger_id is not None:
                client.close_ledger(ledger_id)
        except BaseException:
            if ledger_id is not None:
                try:
                    client.delete_ledgers([ledger_id])
                except QuireSparkError:
                    pass  # the task's own failure is the one to report
            raise
    return ledger_id
