"""`quire bench` without processes: ledgers spread over the clients, the load split
over generator processes, impossible options refused, and the summary's figures."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from services import native
from services.bench.config import BenchConfig, BenchError
from services.bench.histogram import bucket_of, merge_histograms, percentile_s
from services.bench.procs import client_ledgers, load_specs
from services.bench.report import Progress, report, summarize


def test_every_ledger_is_written_and_every_client_has_one() -> None:
    """More ledgers than clients: each ledger belongs to exactly one client; fewer:
    every client has one, and the clients are spread evenly over the ledgers."""
    many = client_ledgers(list(range(100, 110)), 3)
    assert sorted(lid for ledgers in many for lid in ledgers) == list(range(100, 110))
    assert [len(x) for x in many] == [4, 3, 3]
    few = client_ledgers([7, 8], 5)
    assert few == [[7], [8], [7], [8], [7]]


def test_load_specs_split_clients_and_rate() -> None:
    """Clients are split over the load processes with no client lost, and the total
    rate is shared in proportion to the clients."""
    config = BenchConfig(gateway="http://127.0.0.1:8080", concurrency=5, load_procs=2,
                         rate=100.0, token="t", batch=3)  # fmt: skip
    specs = load_specs(config, "http://127.0.0.1:8080", [1, 2, 3, 4, 5], 0.0)
    assert [len(s["client_ledgers"]) for s in specs] == [3, 2]
    assert sum(s["rate"] for s in specs) == pytest.approx(100.0)
    assert specs[0]["host"] == "127.0.0.1" and specs[0]["port"] == 8080
    assert all(s["token"] == "t" and s["batch"] == 3 for s in specs)
    json.dumps(specs)  # goes on a command line


def test_https_goes_to_the_load_with_its_ca_and_other_schemes_are_refused() -> None:
    """An https gateway is loaded over TLS (port 443 by default) with the CA bundle of
    --ca-file; a URL of another scheme is a clear error."""
    spec = load_specs(BenchConfig(ca_file=Path("/ca.pem")), "https://gw", [1], 0.0)[0]
    assert (spec["tls"], spec["ca_file"], spec["port"]) == (True, "/ca.pem", 443)
    assert load_specs(BenchConfig(), "http://gw:80", [1], 0.0)[0]["tls"] is False
    with pytest.raises(BenchError, match="http:// or https://"):
        load_specs(BenchConfig(), "ftp://gw:21", [1], 0.0)


@pytest.mark.parametrize(
    "config",
    [
        BenchConfig(ensemble=2, write_quorum=3),
        BenchConfig(write_quorum=2, ack_quorum=3),
        BenchConfig(local=True, bookies=3, ensemble=4, write_quorum=1, ack_quorum=1),
        BenchConfig(concurrency=2, load_procs=3),
    ],
)
def test_impossible_configs_are_refused(config: BenchConfig) -> None:
    """E >= Qw >= Qa >= 1, enough local bookies, no more load processes than clients."""
    with pytest.raises(BenchError):
        config.check()


def test_histogram_percentiles_and_merge() -> None:
    """Percentiles within the 2 % resolution, and merging is summing."""
    histogram: dict[int, int] = {}
    for ms in range(1, 1001):
        bucket = bucket_of(ms / 1000)
        histogram[bucket] = histogram.get(bucket, 0) + 1
    assert percentile_s(histogram, 0.5) == pytest.approx(0.5, rel=0.03)
    assert percentile_s(histogram, 0.99) == pytest.approx(0.99, rel=0.03)
    merged = merge_histograms([{str(k): v for k, v in histogram.items()}, histogram])
    assert sum(merged.values()) == 2000
    assert percentile_s(merged, 0.5) == percentile_s(histogram, 0.5)
    assert percentile_s({}, 0.99) == 0.0


def _output(entries: int, requests: int, errors: int = 0) -> dict:
    return {
        "elapsed_s": 2.0, "entries": entries, "requests": requests,
        "payload_bytes": entries * 1000, "errors": errors,
        "first_error": "HTTP 503: x" if errors else None, "cpu_s": 0.2,
        "histogram": {str(bucket_of(0.002)): requests},
    }  # fmt: skip


def test_a_small_run_s_throughput_keeps_its_bytes() -> None:
    """MB/s is kept to the byte per second: 81 entries of 1000 bytes in 2 s are 40,500
    bytes/s, not the 40,000 that three decimals of MB/s made of it (a rate-limited bench
    test failed on that once)."""
    config = BenchConfig(gateway="http://g:1")
    summary = summarize(config, "http://g:1", [_output(81, 81)], None, [], None, None, 1.0)
    assert summary["mb_per_s"] * 1e6 == pytest.approx(summary["adds_per_s"] * 1000, rel=1e-4)


def test_summary_has_the_required_keys_and_sums_the_processes() -> None:
    """adds_per_s counts entries of every process; the JSON carries the figures and
    the conditions; report() prints them for people."""
    config = BenchConfig(gateway="http://g:1", batch=10, concurrency=4, load_procs=2)
    summary = summarize(config, "http://g:1", [_output(1000, 100), _output(600, 60, errors=2)],
                        None, [], None, None, 1.5)  # fmt: skip
    assert summary["adds_per_s"] == 800.0 and summary["requests_per_s"] == 80.0
    assert summary["mb_per_s"] == pytest.approx(0.8)
    assert summary["p50_ms"] == pytest.approx(2.0, rel=0.03)
    assert summary["errors"] == 2 and summary["first_error"] == "HTTP 503: x"
    assert summary["load_cpu"] == pytest.approx(0.2)
    assert summary["gateway_rss_mb_max"] is None and summary["bookie_rss_mb_max"] is None
    for key in ("p95_ms", "p99_ms", "p999_ms", "batch", "concurrency", "ledgers"):
        assert key in summary
    text = report(summary)
    assert "800" in text and "p99.9" in text and "first: HTTP 503" in text
    assert summary["native"] is None and "native" not in text  # a gateway of its own build

    local = summarize(BenchConfig(local=True), "http://g:1", [_output(10, 10)], None, [], None,
                      None, 1.0)  # fmt: skip
    assert local["native"] == native.STATUS  # the cluster runs this tree, as built
    assert f"native       {native.STATUS}" in report(local)


def test_progress_line_plain_when_not_a_terminal() -> None:
    """Not a terminal: whole lines (for logs), with the rate so far and the errors."""
    out = io.StringIO()
    progress = Progress(out)
    progress.show({"counting": False, "counted_s": 0, "entries": 0, "errors": 0, "p99_ms": 0},
                  10, 55.0)  # fmt: skip
    progress.show({"counting": True, "counted_s": 2.0, "entries": 4000, "errors": 1,
                   "p99_ms": 3.5}, 10, 60.0)  # fmt: skip
    lines = out.getvalue().splitlines()
    assert "warming up" in lines[0] and "55 MB" in lines[0]
    assert "2,000 adds/s" in lines[1] and "errors 1" in lines[1] and "\r" not in out.getvalue()


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_rich_bar_on_a_terminal_and_nothing_with_quiet() -> None:
    """On a terminal: a rich bar with the figures, gone (transient) after clear();
    --quiet: nothing at all, terminal or not."""
    screen = _Tty()
    progress = Progress(screen)
    progress.show({"counting": True, "counted_s": 5.0, "entries": 10000, "errors": 0,
                   "p99_ms": 1.5}, 10, None)  # fmt: skip
    progress.clear()
    assert "bench" in screen.getvalue() and "2,000 adds/s" in screen.getvalue()
    for stream in (_Tty(), io.StringIO()):
        quiet = Progress(stream, quiet=True)
        quiet.show({"counting": False, "counted_s": 0, "entries": 0, "errors": 0,
                    "p99_ms": 0}, 10, 55.0)  # fmt: skip
        quiet.clear()
        assert stream.getvalue() == ""
