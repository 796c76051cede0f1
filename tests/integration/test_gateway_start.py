"""A gateway serves before it can reach ZooKeeper (issue 7, item 10): /health 503 and
/metrics at once, /v1/ calls 503 unavailable, a few log lines while it retries with
back-off (not a flood), 200 once connected, and 503 again while the session is lost."""

from __future__ import annotations

import time
from pathlib import Path

from services.cluster.processes import ZooKeeperProcess, free_port, port_is_open
from tests.harness import Cluster, wait_for
from tests.integration.gateway_support import Gateway, assert_error


def _health(g: Gateway) -> int:
    return g.request("GET", "/health").status_code


def _log_lines(g: Gateway, text: str) -> int:
    return sum(text in line for line in g.proc.log_path.read_text(errors="replace").splitlines())


def test_gateway_serves_before_zookeeper_and_follows_its_session(tmp_path: Path) -> None:
    """Pointed at a port where no ZooKeeper listens, the gateway answers /health 503 and
    /metrics 200 as soon as it listens, and /v1/ calls 503 unavailable saying why; it
    logs one line per failed attempt with a growing delay (and none of kazoo's per-socket
    warnings); once ZooKeeper starts there /health turns 200 and the API works; while
    ZooKeeper is down /health is 503 again, and 200 when it is back."""
    zk_port = free_port()
    cluster = Cluster(f"127.0.0.1:{zk_port}", "/quire-start", tmp_path)
    zookeeper = ZooKeeperProcess(tmp_path / "zookeeper", zk_port)
    g: Gateway | None = None
    try:
        proc = cluster.start("gateway", wait=False)
        g = Gateway(proc, timeout_s=10.0)
        proc.wait_until(lambda: port_is_open(proc.host, proc.port), 30, "listening")
        started = time.monotonic()
        r = g.request("GET", "/health")
        assert_error(r, 503, "unavailable")
        assert g.request("GET", "/metrics").status_code == 200
        calls = [("GET", "/v1/ledgers"), ("POST", "/v1/ledgers"), ("GET", "/v1/ledgers/1")]
        for method, path in [*calls, ("POST", "/v1/ledgers/1/entries")]:
            r = g.request(method, path, content=b"x")
            assert_error(r, 503, "unavailable")
            assert "ZooKeeper" in r.json()["message"]
        assert time.monotonic() - started < 5.0  # answered at once, not after a time-out

        wait_for(lambda: _log_lines(g, "cannot reach ZooKeeper") >= 3, 30, "three attempts")
        attempts = _log_lines(g, "cannot reach ZooKeeper")
        # Attempts take 3 s each plus a delay doubling from 0.5 s: a handful, no flood.
        assert attempts <= 2 + (time.monotonic() - started) / 3.0, attempts
        assert _log_lines(g, '"logger": "kazoo.client"') == 0
        assert _health(g) == 503

        zookeeper.start()
        zookeeper.wait_ready(60.0)
        wait_for(lambda: _health(g) == 200, 40, "/health 200 once ZooKeeper is up")
        r = g.request("GET", "/v1/ledgers")
        assert r.status_code == 200 and r.json()["ledgers"] == [], r.text

        zookeeper.stop()
        wait_for(lambda: _health(g) == 503, 20, "/health 503 while ZooKeeper is down")
        zookeeper.start()
        zookeeper.wait_ready(60.0)
        wait_for(lambda: _health(g) == 200, 40, "/health 200 once ZooKeeper is back")
    finally:
        if g is not None:
            g.close_client()
        cluster.stop_all()
        zookeeper.stop()
