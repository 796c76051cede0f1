"""`quire bench --log` without processes: impossible option sets refused, the log load
generator's requests (path, headers, a key of its own on every request), and the
log's lines in the report."""

from __future__ import annotations

import pytest

from services.bench.config import BenchConfig, BenchError
from services.bench.log_load import LogLoad
from services.bench.report import log_report_lines, report


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"idempotency_keys": True}, "need --log"),
        ({"handover": True}, "need --log"),
        ({"log": True, "handover": True}, "--local or --second-gateway"),
        ({"log": True, "second_gateway": "http://b:1"}, "is for --handover"),
        ({"log": True, "handover": True, "second_gateway": "http://a:1"}, "another gateway"),
    ],
)
def test_impossible_log_options_are_refused(options: dict, words: str) -> None:
    """Log-only flags without --log, a hand-over without a second gateway, or with the
    same gateway twice: a one-line BenchError naming the flag."""
    config = BenchConfig(gateway="http://a:1", **options)
    with pytest.raises(BenchError, match=words):
        config.check()
    BenchConfig(gateway="http://a:1", log=True, handover=True, second_gateway="http://b:1").check()
    BenchConfig(local=True, log=True, handover=True).check()


def _spec(**extra: object) -> dict:
    return {"host": "127.0.0.1", "port": 8080, "client_ledgers": [[0], [0]], "batch": 1,
            "entry_size": 16, "duration_s": 1.0, "log": "bench-x", **extra}  # fmt: skip


def test_log_load_appends_to_the_log_without_keys() -> None:
    """Every request is a raw record to POST /v1/logs/{log}/records with its length and
    no Idempotency-Key (and a JSON batch with --batch > 1)."""
    load = LogLoad(_spec(token="t"))
    head = load.head([0], 0)
    assert head.startswith(b"POST /v1/logs/bench-x/records HTTP/1.1\r\n")
    assert b"Content-Type: application/octet-stream\r\n" in head
    assert f"Content-Length: {len(load.body)}\r\n".encode() in head
    assert b"Authorization: Bearer t\r\n" in head and head.endswith(b"\r\n\r\n")
    assert b"Idempotency-Key" not in head and load.head([0], 1) == head
    batched = LogLoad(_spec(batch=3))
    assert b"Content-Type: application/json\r\n" in batched.head([0], 0)
    assert batched.body.count(b'"') == 2 + 2 * 3  # {"entries": [three strings]}


def test_log_load_sends_a_new_key_on_every_request() -> None:
    """With idempotency_keys every request carries a key no other request of the run
    uses (so the bench measures dedup's cost, never a dedup hit)."""
    load = LogLoad(_spec(idempotency_keys=True, key_prefix="bench-x"))
    heads = [load.head([0], i) for i in range(100)]
    keys = [h.split(b"Idempotency-Key: ")[1].split(b"\r\n")[0] for h in heads]
    assert len(set(keys)) == 100 and all(k.startswith(b"bench-x-") for k in keys)
    assert all(h.endswith(b"\r\n\r\n") for h in heads)


def test_report_shows_the_log_the_rolls_and_the_handover() -> None:
    """The report names the log instead of ledgers and adds a rolls line and a hand-over
    line (median and max) when the summary has them."""
    summary = {
        "mode": "log", "log": "bench-x", "ledgers": 3, "gateway": "http://g:1", "local": True,
        "concurrency": 4, "ensemble": 3, "write_quorum": 2, "ack_quorum": 2, "entry_size": 10,
        "batch": 1, "rate": 0.0, "duration_s": 2.0, "adds_per_s": 10.0, "requests_per_s": 10.0,
        "mb_per_s": 0.0, "p50_ms": 1.0, "p95_ms": 1.0, "p99_ms": 1.0, "p999_ms": 1.0,
        "max_ms": 1.0, "errors": 0, "load_cpu": 0.1, "gateway_cpu": None, "bookie_cpu": None,
        "others_cpu": 0.0, "nproc": 2, "gateway_rss_mb_max": None, "bookie_rss_mb_max": None,
        "rolls": 2, "roll_every_s": 1.0, "roll_p50_ms": 40.0, "roll_max_ms": 50.0,
        "roll_errors": 0, "handover_reps": 3, "handover_ms_median": 150.0,
        "handover_ms_max": 190.0, "handover_writer_ms_median": 140.0,
    }  # fmt: skip
    text = report(summary)
    assert "to log bench-x (3 ledger(s) at the end)" in text
    assert "rolls" in text and "median 150.0  max 190.0" in text
    assert log_report_lines({"rolls": 0}) == []
