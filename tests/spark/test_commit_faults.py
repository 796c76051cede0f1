"""The write connector's commits when the network loses answers, against a real cluster
(no SparkSession: the sink and writer objects are driven as Spark's driver drives them,
their gateway calls going through a transport that drops what a test tells it to).

An attach that landed but whose answer was lost, retried, must be recognised as the
same attach: the log then holds the batch exactly once and lists only ledgers that
exist. A batch job whose attach landed must not fail on its clean-up."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from pyspark.sql import Row
from pyspark.sql.types import StringType, StructField, StructType

from services.spark import ingest
from services.spark import limits as spark_limits
from services.spark.batch_write import QuireCommitMessage, QuireWriter
from services.spark.stream_write import QuireStreamWriter
from tests.harness import Cluster
from tests.integration.gateway_support import Gateway, ok
from tests.shared import StandardCluster, unique_name
from tests.spark.write_support import get_log, read_log

SCHEMA = StructType([StructField("data", StringType())])


@dataclass
class Env:
    cluster: Cluster
    a: Gateway
    b: Gateway


@pytest.fixture(scope="module")
def env(shared_cluster: StandardCluster) -> Iterator[Env]:
    """The standard cluster's two gateways (tests/shared.py): the faults are in the
    connector's transport, no process is harmed."""
    yield Env(shared_cluster.cluster, shared_cluster.writer, shared_cluster.reader)


# A rule: (method, path predicate) -> what to do with the next matching request.
Rule = tuple[str, Callable[[str], bool], str]


@dataclass
class Lossy(httpx.BaseTransport):
    """Forwards to the real gateway, except the requests ``rules`` name, each once in
    order: ``"lose_answer"`` forwards the request and drops its answer (the caller sees
    a read time-out), ``"fail"`` does not forward it (the connection is refused)."""

    rules: list[Rule] = field(default_factory=list)
    seen: list[tuple[str, str, str]] = field(default_factory=list)
    inner: httpx.HTTPTransport = field(default_factory=httpx.HTTPTransport)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        method, path = request.method, request.url.path
        if self.rules and self.rules[0][0] == method and self.rules[0][1](path):
            action = self.rules.pop(0)[2]
            self.seen.append((method, path, action))
            if action == "fail":
                raise httpx.ConnectError("refused (test)", request=request)
            response = self.inner.handle_request(request)
            response.read()
            response.close()
            raise httpx.ReadTimeout("answer lost (test)", request=request)
        self.seen.append((method, path, "passed"))
        return self.inner.handle_request(request)


@pytest.fixture
def lossy(monkeypatch: pytest.MonkeyPatch) -> Lossy:
    """Every IngestClient the connector makes goes through one ``Lossy`` transport."""
    transport = Lossy()
    monkeypatch.setattr(spark_limits, "RETRY_DELAY_S", 0.0)
    patched = functools.partial(ingest.IngestClient, transport=transport)
    monkeypatch.setattr(ingest, "IngestClient", patched)
    return transport


def listed_ledgers_exist(g: Gateway, log: str) -> list[int]:
    """The ledgers the log lists that do not exist (must be none)."""
    ledgers = get_log(g, log)["ledgers"]
    return [lid for lid in ledgers if g.request("GET", f"/v1/ledgers/{lid}").status_code != 200]


def test_stream_commit_whose_attach_answer_was_lost_keeps_the_batch(env: Env, lossy: Lossy) -> None:
    """A micro-batch commit whose attach landed but whose answer was lost, the read
    that would settle it failing too, retried: the retry is the same attach (committed),
    nothing is deleted, the log lists only existing ledgers and holds the batch once."""
    log = unique_name("faults-stream-1")
    options = {"gateway": env.a.url, "log": log, "commit_id": "faults-q1"}
    sink = QuireStreamWriter(options, SCHEMA, False)
    messages = [
        QuireCommitMessage(ingest.write_task(sink.options, "faults-q1", p, 0, iter(rows)), p)
        for p, rows in enumerate([[b"a", b"b"], [b"c"]])
    ]
    lossy.rules = [
        ("POST", lambda p: p == f"/v1/logs/{log}/ledgers", "lose_answer"),
        ("GET", lambda p: p.startswith(f"/v1/logs/{log}"), "fail"),
    ]
    sink.commit(messages, 5)  # type: ignore[arg-type]
    assert ("POST", f"/v1/logs/{log}/ledgers", "lose_answer") in lossy.seen
    assert listed_ledgers_exist(env.b, log) == []
    assert read_log(env.b, log) == [b"a", b"b", b"c"]
    assert ok(env.b.request("GET", f"/v1/logs/{log}/commits/faults-q1"))["sequence"] == 5
    # Spark runs the batch again after a restart: skipped, its new ledgers deleted.
    again = [sink.write(iter([Row(data="a"), Row(data="b"), Row(data="c")]))]
    sink.commit(again, 5)  # type: ignore[arg-type]
    assert read_log(env.b, log) == [b"a", b"b", b"c"]
    assert env.b.request("GET", f"/v1/ledgers/{again[0].ledger_id}").status_code == 404


def test_batch_job_succeeds_when_clean_up_after_its_attach_fails(
    env: Env, lossy: Lossy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch job whose attach landed succeeds even when its clean-up of stray ledgers
    fails (the data is in the log: failing would make the user run it again and write it
    twice); the log holds the job's records once."""
    log = unique_name("faults-batch-1")
    writer = QuireWriter({"gateway": env.a.url, "log": log}, SCHEMA, False)
    messages = [writer.write(iter([Row(data="x"), Row(data="y")]))]
    monkeypatch.setattr(spark_limits, "RETRY_BUDGET_S", 0.0)  # the listing's failure stays
    lossy.rules = [("GET", lambda p: p == "/v1/ledgers", "fail")] * 5
    writer.commit(messages)  # type: ignore[arg-type]
    assert read_log(env.b, log) == [b"x", b"y"]
    assert listed_ledgers_exist(env.b, log) == []


def test_stream_abort_with_a_lost_task_looks_only_at_the_query_s_new_ledgers(
    env: Env, lossy: Lossy
) -> None:
    """A micro-batch abort missing a task's message (its worker died: its ledger was not
    deleted) deletes that ledger, looking only at ledgers made since the query's last
    committed batch, never at every ledger of the cluster; a ledger the log lists stays."""
    log = unique_name("faults-abort-1")
    sink = QuireStreamWriter(
        {"gateway": env.a.url, "log": log, "commit_id": "faults-q3"}, SCHEMA, False
    )
    others = [int(env.b.create()["ledger_id"]) for _ in range(5)]  # not the query's
    committed = [sink.write(iter([Row(data="one")]))]
    sink.commit(committed, 1)  # type: ignore[arg-type]
    kept = sink.write(iter([Row(data="two")]))
    lost = ingest.write_task(sink.options, "faults-q3", 1, 0, iter([b"lost"]))
    lossy.seen.clear()
    sink.abort([kept, None], 2)
    looked_at = {p for m, p, _ in lossy.seen if m == "GET" and p.startswith("/v1/ledgers/")}
    assert looked_at.isdisjoint({f"/v1/ledgers/{lid}" for lid in others}), looked_at
    for lid in (kept.ledger_id, lost):
        assert env.b.request("GET", f"/v1/ledgers/{lid}").status_code == 404
    assert read_log(env.b, log) == [b"one"]
    assert listed_ledgers_exist(env.b, log) == []
