"""Quire's single-record appends beside its peers, in ONE run, back to back (issue 13):

    .venv/bin/python benchmarks/compare_peers.py [--seconds 10] [--rounds 3] [--json-out FILE]
        [--skip nats,etcd]

Runs one after the other, never at once (each has the machine to itself):
  - nats_jetstream.py --only k1,k256   3-node JetStream R3, 1 KiB
  - etcd_raft.py --only k1,k256        3-node etcd 3.4, 1 KiB (fsync)
    (the peers' scripts are not part of the repository: ``PEER`` says where they are looked
    for, a directory beside the clone)
  - quire bench --local (fsync on, 1 KiB, E=3 Qw=2 Qa=2): REST single-entry adds with 1, 64
    and 256 clients, the same with the gateway's fast path off (``QUIRE_FAST_PATH=false``:
    the routes as they were, "today" in the same run), streaming with 256 records in
    flight on one connection (when ``quire bench --stream`` exists), and batches of 100.

With ``--rounds N`` every case (the peers' too) runs N times, round after round, and
the median round of each case is the figure judged (by rate; by p50 for one in flight);
every round's rate is printed and kept in the JSON. On this 2-core machine one case's
figure moves by up to a third between runs (where the scheduler puts five busy
processes), so one round alone can meet or miss a target by luck.

Prints the table with each figure and the CPU its load generator used (``client``, in
cores: the peers' Python clients and ``quire bench``'s generator share the machine with
what they measure), Quire's ratios to the targets' references, whether
each target is met, the machine (CPU model, load of other processes), and ends with one
JSON line. Targets (issue 13): REST single 64-256 clients >= 2x the fast-path-off figure
and >= 1x etcd K=256; streaming 256 in flight >= 1x JetStream K=256; one in flight p50
<= 1.0 ms and ahead of etcd's k1 p50 (a latency ratio: under 1 is ahead); batches
unchanged or better."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from services.bench.measure import cpu_model  # noqa: E402

PEER = ROOT.parent / "shared" / "peer"
QUIRE = ROOT / ".venv" / "bin" / "quire"


def last_json(
    cmd: list[str], timeout_s: float, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run ``cmd``; its last stdout line that is a JSON object (or {"error": ...})."""
    print(f"$ {' '.join(cmd)}", file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}
    print(f"  exit {done.returncode} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    lines = [line for line in done.stdout.splitlines() if line.strip().startswith("{")]
    if not lines:
        print(done.stderr[-2000:], file=sys.stderr)
        return {"error": f"no JSON (exit {done.returncode})"}
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def peer_rate(run: dict[str, Any], case: str) -> tuple[float | None, float | None]:
    c = run.get(case) or {}
    rate = c.get("msgs_per_s") or c.get("puts_per_s") or c.get("ops_per_s")
    latency = c.get("ack_latency") or c.get("latency") or {}
    return rate, latency.get("p50_ms")


def stream_supported() -> bool:
    done = subprocess.run([str(QUIRE), "bench", "--help"], capture_output=True, text=True)
    return "--stream" in done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=1, help="runs of every case")
    parser.add_argument("--json-out")
    parser.add_argument("--skip", default="", help="comma list of: nats,etcd,quire,slow")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    seconds = str(int(args.seconds))
    res: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpu_model": cpu_model(),
        "load_before": os.getloadavg(),
    }
    peers: dict[str, list[str]] = {}
    if "nats" not in skip:
        peers["nats"] = [sys.executable, str(PEER / "nats_jetstream.py"), "--only", "k1,k256"]
    if "etcd" not in skip:
        peers["etcd"] = [sys.executable, str(PEER / "etcd_raft.py"), "--only", "k1,k256"]
    cases = quire_cases(seconds, skip) if "quire" not in skip else {}
    peer_runs: dict[str, list[dict[str, Any]]] = {name: [] for name in peers}
    quire_runs: dict[str, list[dict[str, Any]]] = {name: [] for name in cases}
    for round_no in range(args.rounds):
        print(f"--- round {round_no + 1} of {args.rounds}", file=sys.stderr, flush=True)
        for name, cmd in peers.items():
            peer_runs[name].append(last_json([*cmd, "--seconds", seconds], 200))
        for name, (extra, env) in cases.items():
            quire_runs[name].append(last_json(extra, 300, dict(os.environ, **env)))
    for name, runs in peer_runs.items():
        res[name] = {
            case: median_by([r.get(case) or {} for r in runs], peer_case_rate)
            for case in ("k1", "k256")
        }
        res[name]["rounds"] = [
            [peer_case_rate(r.get(c) or {}) for r in runs] for c in ("k1", "k256")
        ]
    if cases:
        res["quire"] = {
            name: dict(median_by(runs, quire_key(name)), rounds=[_figure_rate(r) for r in runs])
            for name, runs in quire_runs.items()
        }
    res["rounds"] = args.rounds
    res["load_after"] = os.getloadavg()
    res["verdict"] = verdict(res)
    print_table(res)
    print(json.dumps(res))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res, indent=2))
    return 0


def quire_cases(seconds: str, skip: set[str]) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Each Quire case: its ``quire bench`` command and its extra environment."""
    common = [str(QUIRE), "bench", "--local", "-e", "3", "-w", "2", "-a", "2"]
    common += ["--entry-size", "1024", "--duration", seconds]
    cases: dict[str, tuple[list[str], dict[str, str]]] = {
        "rest_c1": (["--concurrency", "1", "--ledgers", "1"], {}),
        "rest_c64": (["--concurrency", "64", "--ledgers", "4"], {}),
        "rest_c256": (["--concurrency", "256", "--ledgers", "4"], {}),
        "batch100_c16": (["--concurrency", "16", "--batch", "100", "--ledgers", "4"], {}),
    }
    if "slow" not in skip:
        off = {"QUIRE_FAST_PATH": "false"}
        cases["rest_c64_no_fast_path"] = (["--concurrency", "64", "--ledgers", "4"], off)
        cases["rest_c256_no_fast_path"] = (["--concurrency", "256", "--ledgers", "4"], off)
        cases["batch100_c16_no_fast_path"] = (
            ["--concurrency", "16", "--batch", "100", "--ledgers", "4"],
            off,
        )
    if stream_supported():
        cases["stream_256"] = (
            ["--stream", "--concurrency", "1", "--in-flight", "256", "--ledgers", "1"],
            {},
        )
    return {name: ([*common, *extra], env) for name, (extra, env) in cases.items()}


def peer_case_rate(case: dict[str, Any]) -> float:
    rate, _ = peer_rate({"c": case}, "c")
    return float(rate or 0.0)


def _figure_rate(figure: dict[str, Any]) -> float:
    return float(figure.get("adds_per_s") or figure.get("entries_per_s") or 0.0)


def quire_key(case: str) -> Any:
    """What orders a case's rounds: p50 for one in flight (lower is better), else rate."""
    if case == "rest_c1":
        return lambda f: -(f.get("p50_ms") or float("inf"))
    return _figure_rate


def median_by(runs: list[dict[str, Any]], key: Any) -> dict[str, Any]:
    """The median run by ``key`` (the lower middle of an even count); {} if none."""
    if not runs:
        return {}
    ordered = sorted(runs, key=key)
    return ordered[(len(ordered) - 1) // 2]


def _rate(res: dict[str, Any], case: str) -> float | None:
    figure = (res.get("quire") or {}).get(case) or {}
    return figure.get("adds_per_s") or figure.get("entries_per_s")


def verdict(res: dict[str, Any]) -> dict[str, Any]:
    """Each target of issue 13 with its figures and whether this run met it."""
    out: dict[str, Any] = {}
    nats_k256, _ = peer_rate(res.get("nats") or {}, "k256")
    etcd_k256, _ = peer_rate(res.get("etcd") or {}, "k256")
    for clients in ("c64", "c256"):
        now, before = _rate(res, f"rest_{clients}"), _rate(res, f"rest_{clients}_no_fast_path")
        if now and before:
            out[f"rest_{clients}_vs_no_fast_path"] = {
                "ratio": now / before,
                "met": now >= 2 * before,
            }
        if now and etcd_k256:
            out[f"rest_{clients}_vs_etcd_k256"] = {
                "ratio": now / etcd_k256,
                "met": now >= etcd_k256,
            }
    stream = _rate(res, "stream_256")
    if stream and nats_k256:
        out["stream_256_vs_nats_k256"] = {"ratio": stream / nats_k256, "met": stream >= nats_k256}
    one = (res.get("quire") or {}).get("rest_c1") or {}
    if one.get("p50_ms") is not None:
        out["rest_c1_p50_ms"] = {"value": one["p50_ms"], "met": one["p50_ms"] <= 1.0}
        # The same target's other half, "ahead of etcd at equal durability", as a ratio
        # of p50 latencies (under 1 is ahead). The 1.0 ms is etcd's 1.25 ms less a fifth
        # in the run the issue quotes; the ratio compares like with like on any disk.
        _, etcd_k1_p50 = peer_rate(res.get("etcd") or {}, "k1")
        if etcd_k1_p50:
            out["rest_c1_p50_vs_etcd_k1_p50"] = {
                "ratio": one["p50_ms"] / etcd_k1_p50,
                "met": one["p50_ms"] < etcd_k1_p50,
            }
    batch, batch_before = _rate(res, "batch100_c16"), _rate(res, "batch100_c16_no_fast_path")
    if batch and batch_before:
        out["batch_vs_no_fast_path"] = {
            "ratio": batch / batch_before,
            "met": batch >= 0.95 * batch_before,
        }
    return out


def client_cores(figure: dict[str, Any]) -> str:
    """The CPU the load generator used, in cores, as the column shows it: the peers'
    Python clients (nats-py, aetcd on grpc.aio) share the two cores with their servers
    as ``quire bench``'s generator does with ours, so a lighter client leaves more of the
    machine to the system it measures."""
    if "client_cpu_pct" in figure:
        return f"{figure['client_cpu_pct'] / 100:7.2f}"
    if "load_cpu" in figure:
        return f"{figure['load_cpu']:7.2f}"
    return f"{'':>7}"


def print_table(res: dict[str, Any]) -> None:
    print(
        f"\nCPU: {res['cpu_model']}; load before/after: {res['load_before']} / {res['load_after']}"
    )
    print(f"{'system':8} {'case':28} {'1 KiB/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'client':>7}")
    for peer in ("nats", "etcd"):
        for case in ("k1", "k256"):
            rate, p50 = peer_rate(res.get(peer) or {}, case)
            if rate:
                client = client_cores((res.get(peer) or {}).get(case) or {})
                print(f"{peer:8} {case:28} {rate:10.0f} {p50 or 0:8.2f} {'':>8} {client}")
    for case, figure in (res.get("quire") or {}).items():
        rate = figure.get("adds_per_s") or figure.get("entries_per_s")
        if rate:
            p50, p99 = figure.get("p50_ms") or 0, figure.get("p99_ms") or 0
            cpu = f"gw {figure.get('gateway_cpu', 0):.2f} bk {figure.get('bookie_cpu', 0):.2f}"
            others = f"others {figure.get('others_cpu', 0):.2f}"
            rounds = "/".join(f"{r:.0f}" for r in figure.get("rounds", []))
            client = client_cores(figure)
            print(
                f"{'quire':8} {case:28} {rate:10.0f} {p50:8.2f} {p99:8.2f} {client}"
                f"  {cpu} {others}  rounds {rounds}"
            )
        else:
            print(f"{'quire':8} {case:28} {figure.get('error', '?')}")
    print("\ntargets:")
    for name, v in res["verdict"].items():
        figure = f"x{v['ratio']:.2f}" if "ratio" in v else f"{v['value']:.2f} ms"
        print(f"  {name:34} {figure:>10}  {'met' if v['met'] else 'NOT met'}")


if __name__ == "__main__":
    sys.exit(main())
