"""`quire up`: a real local cluster as a subprocess, stopped by signal, restarted on its data.

Every test stops everything it started even when it fails: the `quire up`
process, every pid it printed and every descendant seen while it ran, by pid.
"""

from __future__ import annotations

import json
import os
import re
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from kazoo.client import KazooClient
from typer.testing import CliRunner

from services.cluster import processes
from services.cluster.config import port_free
from services.cluster.processes import ZooKeeperProcess, free_port, free_port_block
from tests.harness import wait_for
from tests.integration.test_cli_ledger import UNREACHABLE, error, here, ok, quire

START_DEADLINE_S = 150.0
STOP_DEADLINE_S = 45.0
LINE = re.compile(r"^(?P<name>\S+)\s+(?P<where>\S+)\s+pid (?P<pid>\d+)\s+log (?P<log>.+)$")


def _quire() -> list[str]:
    script = Path(sys.executable).parent / "quire"
    return [str(script)] if script.exists() else [sys.executable, "-m", "services.cli"]


class QuireUp:
    """One `quire up` subprocess: its output parsed, its descendants remembered."""

    def __init__(
        self,
        args: list[str],
        cwd: Path,
        keep_secret: bool = False,
        extra_env: dict[str, str] | None = None,
    ):
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("QUIRE_") or (keep_secret and k == "QUIRE_CLUSTER_SECRET")
        }
        env.update(extra_env or {})
        self.proc = subprocess.Popen(
            [*_quire(), "up", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.seen_pids: set[int] = set()
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.stdout), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream, lines: list[str]) -> None:
        for line in stream:
            lines.append(line.rstrip("\n"))

    def drain(self, deadline_s: float = 10.0) -> None:
        """Wait until the readers saw the end of quire up's output (it exited)."""
        for reader in self._readers:
            reader.join(deadline_s)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return "stdout:\n" + "\n".join(self.stdout) + "\nstderr:\n" + "\n".join(self.stderr)

    def _remember_descendants(self) -> None:
        try:
            self.seen_pids.update(c.pid for c in psutil.Process(self.pid).children(recursive=True))
        except psutil.Error:
            pass

    def wait_line(self, pattern: str, stream: str = "stdout", deadline_s: float = 30.0) -> str:
        lines = self.stdout if stream == "stdout" else self.stderr
        end = time.monotonic() + deadline_s
        regex = re.compile(pattern)
        while time.monotonic() < end:
            self._remember_descendants()
            for line in list(lines):
                if regex.search(line):
                    return line
            if self.proc.poll() is not None:
                self.drain()
                for line in list(lines):
                    if regex.search(line):
                        return line
                raise AssertionError(
                    f"quire up exited with {self.proc.returncode} before printing "
                    f"{pattern!r}\n{self.output()}"
                )
            time.sleep(0.1)
        raise AssertionError(f"no line matching {pattern!r} in {deadline_s}s\n{self.output()}")

    def wait_ready(self) -> dict[str, dict]:
        self.wait_line(r"^quire up: ready", deadline_s=START_DEADLINE_S)
        return self.started()

    def started(self) -> dict[str, dict]:
        """name -> {"where", "pid", "log"} of every process it printed."""
        found = {}
        for line in self.stdout:
            match = LINE.match(line)
            if match:
                found[match["name"]] = {
                    "where": match["where"],
                    "pid": int(match["pid"]),
                    "log": Path(match["log"]),
                }
                self.seen_pids.add(int(match["pid"]))
        return found

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self._remember_descendants()
        os.kill(self.pid, sig)
        try:
            return self.proc.wait(STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"quire up did not exit {STOP_DEADLINE_S}s after {signal.Signals(sig).name}\n"
                f"{self.output()}"
            ) from None

    def kill_everything(self) -> None:
        """Teardown: SIGKILL quire up and every process it started, by pid."""
        self._remember_descendants()
        self.started()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        for pid in self.seen_pids:
            if alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def run_up(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator:
    """Start `quire up` processes; all are killed at teardown, their output shown on failure."""
    started: list[QuireUp] = []

    def start(*args: str) -> QuireUp:
        up = QuireUp(list(args), cwd=tmp_path)
        started.append(up)
        return up

    try:
        yield start
    finally:
        for up in started:
            up.kill_everything()
        failed = getattr(getattr(request.node, "rep_call", None), "failed", False)
        if failed:
            for up in started:
                print(up.output())


def ports_needed(bookies: int) -> int:
    """P (gateway), P+1..P+N (bookies), P+N+1 (auditor), P+N+2 (replicator)."""
    return 1 + bookies + 2


def _bookie_info(url: str, secret: str | None = None) -> dict:
    """The bookie's /v1/info; without the secret `quire up` made, 401 and None."""
    headers = {"X-Cluster-Secret": secret} if secret else {}
    r = httpx.get(f"{url}/v1/info", headers=headers, timeout=5.0)
    if secret is None:
        assert r.status_code == 401 and r.json()["error"] == "unauthorized", r.text
        return {}
    assert r.status_code == 200, r.text
    return r.json()


def _check_bookies(started: dict[str, dict], gateway_port: int, bookies: int) -> dict[str, str]:
    """Every bookie printed is healthy on P+i; returns bookie id -> instance id."""
    instances = {}
    for i in range(1, bookies + 1):
        entry = started[f"bookie-{i}"]
        assert entry["where"] == f"http://127.0.0.1:{gateway_port + i}"
        assert httpx.get(f"{entry['where']}/health", timeout=5.0).status_code == 200
        assert entry["log"].exists()
        _bookie_info(entry["where"])  # a cluster secret is on by default
        cookie_file = entry["log"].parent.parent / f"bookie-{i}" / "cookie.json"
        cookie = json.loads(cookie_file.read_text())
        assert cookie["bookie_id"] == f"127.0.0.1:{gateway_port + i}"
        instances[cookie["bookie_id"]] = cookie["instance_id"]
    return instances


def _assert_all_gone(up: QuireUp, started: dict[str, dict]) -> None:
    pids = [e["pid"] for e in started.values()]
    wait_for(lambda: not any(alive(p) for p in pids), 10.0, "every printed pid to be gone")
    assert not any(alive(p) for p in up.seen_pids)


def test_up_with_external_zookeeper_stops_on_sigterm_and_restarts(
    run_up, zookeeper: ZooKeeperProcess, zk_root: str, zk_client: KazooClient, tmp_path: Path
) -> None:
    """quire up --zk: bookies healthy and registered; SIGTERM stops all (exit 0); data reused."""
    bookies = 3
    port = free_port_block(ports_needed(bookies))
    data_dir = tmp_path / "data"
    args = [
        "--bookies", str(bookies),
        "--data-dir", str(data_dir),
        "--gateway-port", str(port),
        "--zk", zookeeper.connect_string,
        "--zk-root", zk_root,
        "--zk-session-timeout", "4",
    ]  # fmt: skip
    up = run_up(*args)
    started = up.wait_ready()
    assert "zookeeper" not in started, "it must not start a ZooKeeper when --zk is given"
    instances = _check_bookies(started, port, bookies)
    for bookie_id in instances:
        assert zk_client.exists(f"/bookies/{bookie_id}"), f"{bookie_id} is not registered"
    for name, entry in started.items():
        assert entry["log"].parent == data_dir / "logs"
        assert httpx.get(f"{entry['where']}/health", timeout=5.0).status_code == 200, name
    if "gateway" in started:
        assert started["gateway"]["where"] == f"http://127.0.0.1:{port}"

    assert up.stop(signal.SIGTERM) == 0, up.output()
    _assert_all_gone(up, started)
    assert any("stopped everything" in line for line in up.stdout), up.output()
    # A clean stop closes the sessions: the registrations go at once.
    wait_for(
        lambda: not any(zk_client.exists(f"/bookies/{b}") for b in instances),
        5.0,
        "registrations to disappear",
    )

    again = run_up(*args)
    restarted = again.wait_ready()
    assert _check_bookies(restarted, port, bookies) == instances, "cookies were not reused"
    assert again.stop(signal.SIGINT) == 0, again.output()
    _assert_all_gone(again, restarted)


def test_up_generates_a_cluster_secret_and_never_prints_it(
    run_up, zookeeper: ZooKeeperProcess, zk_root: str, tmp_path: Path
) -> None:
    """Without a given secret, quire up makes a random one: bookies refuse /v1 calls without
    it (401) while the gateway, which got it too, writes and reads through them; a secret
    given in QUIRE_CLUSTER_SECRET wins; no secret appears in quire up's output, in a log or
    on a command line."""
    bookies = 2
    port = free_port_block(ports_needed(bookies))
    data_dir = tmp_path / "data"
    args = [
        "--bookies", str(bookies),
        "--data-dir", str(data_dir),
        "--gateway-port", str(port),
        "--zk", zookeeper.connect_string,
        "--zk-root", zk_root,
        "--zk-session-timeout", "4",
        "--without", "auditor", "--without", "replicator",
    ]  # fmt: skip
    up = run_up(*args)
    started = up.wait_ready()
    for i in range(1, bookies + 1):
        _bookie_info(started[f"bookie-{i}"]["where"])  # 401 without the secret
    pids = [e["pid"] for e in started.values()]
    environs = [psutil.Process(pid).environ().get("QUIRE_CLUSTER_SECRET") for pid in pids]
    secret = environs[0]
    assert secret and len(secret) == 64 and all(e == secret for e in environs)
    assert not any(secret in " ".join(psutil.Process(pid).cmdline()) for pid in pids)
    if "gateway" in started:
        gateway = started["gateway"]["where"]
        r = httpx.post(
            f"{gateway}/v1/ledgers",
            json={"ensemble_size": 2, "write_quorum": 2, "ack_quorum": 2},
            timeout=30.0,
        )
        assert r.status_code == 201, r.text
        lid = r.json()["ledger_id"]
        r = httpx.post(f"{gateway}/v1/ledgers/{lid}/entries", content=b"hello", timeout=30.0)
        assert r.status_code == 200, r.text
    assert up.stop(signal.SIGTERM) == 0, up.output()
    _assert_all_gone(up, started)
    assert secret not in up.output()
    for log in (data_dir / "logs").iterdir():
        assert secret not in log.read_text(errors="replace"), log

    given = "given-secret-" + "x" * 20
    os.environ["QUIRE_CLUSTER_SECRET"] = given
    try:
        again = QuireUp(args, cwd=tmp_path, keep_secret=True)
    finally:
        del os.environ["QUIRE_CLUSTER_SECRET"]
    try:
        restarted = again.wait_ready()
        info = _bookie_info(restarted["bookie-1"]["where"], given)
        assert info["bookie_id"] == f"127.0.0.1:{port + 1}"
        assert again.stop(signal.SIGTERM) == 0, again.output()
        assert given not in again.output()
    finally:
        again.kill_everything()


def test_up_tls_serves_https_and_its_ca_is_what_the_clients_need(
    run_up, zookeeper: ZooKeeperProcess, zk_root: str, tmp_path: Path
) -> None:
    """quire up --tls: every service on https:// with certificates of a CA kept in
    DATA_DIR/tls (keys 0600), the printed curl and export lines name it; with it the CLI
    (--ca-file, QUIRE_CA_FILE, a stream) and quire bench work, without it the CLI says in
    one line what to give; plain http is refused; a restart keeps the CA."""
    bookies = 2
    port = free_port_block(ports_needed(bookies))
    data_dir = tmp_path / "data"
    args = [
        "--tls",
        "--bookies", str(bookies),
        "--data-dir", str(data_dir),
        "--gateway-port", str(port),
        "--zk", zookeeper.connect_string,
        "--zk-root", zk_root,
        "--zk-session-timeout", "4",
        "--without", "replicator",
    ]  # fmt: skip
    up = run_up(*args)
    started = up.wait_ready()
    ca = data_dir / "tls" / "ca.pem"
    url = f"https://127.0.0.1:{port}"
    assert {e["where"].split("://")[0] for n, e in started.items() if n != "zookeeper"} == {"https"}
    assert started["gateway"]["where"] == url
    printed = "\n".join(up.stdout)
    assert f"curl --cacert {ca} {url}/v1/ledgers" in printed, printed
    assert f"export QUIRE_GATEWAY={url} QUIRE_CA_FILE={ca}" in printed, printed
    keys = sorted((data_dir / "tls").glob("*.key"))
    assert {k.stem for k in keys} == {"ca", "gateway", "auditor", "bookie-1", "bookie-2"}
    assert all(k.stat().st_mode & 0o777 == 0o600 for k in keys)
    ca_bytes = ca.read_bytes()

    env = {"QUIRE_GATEWAY": url, "QUIRE_CA_FILE": str(ca)}
    verify = ssl.create_default_context(cafile=ca)
    assert httpx.get(f"{url}/v1/ledgers", verify=verify, timeout=10.0).status_code == 200
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/v1/ledgers", timeout=10.0)
    # The gateway reaches the bookies and the auditor over TLS: `quire status` is OK (polled
    # in-process: a process per poll costs 0.4 s of CPU; the real processes follow).
    wait_for(lambda: here("status", env=env).returncode == 0, 30.0, "quire status OK over TLS")

    lid = ok(
        quire("ledger", "create", "-q", "-e", "2", gateway=url, env={"QUIRE_CA_FILE": str(ca)})
    )
    lid = lid.strip()
    ok(here("ledger", "append", lid, "over", "tls", env=env))
    ok(quire("ledger", "append", lid, "--stream", "streamed", env=env))
    assert ok(here("ledger", "read", lid, env=env)).splitlines() == ["over", "tls", "streamed"]
    for refused in (
        quire("ledger", "read", lid, gateway=url),
        here("ledger", "append", lid, "--stream", "never", gateway=url),
    ):
        stderr = error(refused, UNREACHABLE, "gateway_unreachable")
        assert "does not verify" in stderr and "--ca-file" in stderr
    bench = ok(quire(
        "bench", "--duration", "0.5", "--warmup", "0.1", "--concurrency", "2", "-e", "2", "-q",
        env=env,
    ))  # fmt: skip
    summary = json.loads(bench.strip().splitlines()[-1])
    assert summary["errors"] == 0 and summary["entries"] > 0, summary

    assert up.stop(signal.SIGTERM) == 0, up.output()
    _assert_all_gone(up, started)
    again = run_up(*args)
    again.wait_ready()
    assert ca.read_bytes() == ca_bytes  # clients holding the CA keep working
    assert ok(quire("ledger", "read", lid, env=env)).splitlines()[0] == "over"
    assert again.stop(signal.SIGTERM) == 0, again.output()


def test_up_starts_its_own_zookeeper_and_survives_a_dead_bookie(run_up, tmp_path: Path) -> None:
    """Without --zk it runs ZooKeeper itself; a bookie killed -9 is reported, the rest run on;
    SIGTERM stops ZooKeeper too; the next start reuses ZooKeeper's data and the cookies."""
    bookies = 2
    port = free_port_block(ports_needed(bookies))
    zk_port = free_port()
    data_dir = tmp_path / "data"
    args = [
        "--bookies", str(bookies),
        "--data-dir", str(data_dir),
        "--gateway-port", str(port),
        "--zk-port", str(zk_port),
        "--zk-session-timeout", "4",
    ]  # fmt: skip
    up = run_up(*args)
    started = up.wait_ready()
    assert started["zookeeper"]["where"] == f"127.0.0.1:{zk_port}"
    assert started["zookeeper"]["log"] == data_dir / "logs" / "zookeeper.log"
    assert (data_dir / "zookeeper").is_dir()
    instances = _check_bookies(started, port, bookies)
    client = KazooClient(hosts=f"127.0.0.1:{zk_port}/quire", timeout=10.0)
    client.start(10.0)
    try:
        for bookie_id in instances:
            assert client.exists(f"/bookies/{bookie_id}")
    finally:
        client.stop()
        client.close()

    victim = started["bookie-2"]["pid"]
    os.kill(victim, signal.SIGKILL)
    up.wait_line(rf"bookie-2 \(pid {victim}\) was killed by SIGKILL", stream="stderr")
    with pytest.raises(subprocess.TimeoutExpired):  # it must not exit: watch it for 1 s
        up.proc.wait(1.0)
    assert httpx.get(f"{started['bookie-1']['where']}/health", timeout=5.0).status_code == 200

    assert up.stop(signal.SIGTERM) == 0, up.output()
    _assert_all_gone(up, started)
    assert port_free("127.0.0.1", zk_port)

    again = run_up(*args)
    restarted = again.wait_ready()
    assert restarted["zookeeper"]["pid"] != started["zookeeper"]["pid"]
    assert _check_bookies(restarted, port, bookies) == instances, "cookies were not reused"
    assert again.stop(signal.SIGTERM) == 0, again.output()
    _assert_all_gone(again, restarted)


def test_up_refuses_a_busy_port_and_starts_nothing(
    run_up, zookeeper: ZooKeeperProcess, zk_root: str, tmp_path: Path
) -> None:
    """A busy bookie port: one clear error line naming it, exit 1, nothing left running."""
    port = free_port_block(ports_needed(4))
    with socket_listening(port + 2):
        up = run_up(
            "--data-dir", str(tmp_path / "data"),
            "--gateway-port", str(port),
            "--zk", zookeeper.connect_string,
            "--zk-root", zk_root,
        )  # fmt: skip
        assert up.proc.wait(60) == 1, up.output()
        up.drain()
    errors = [line for line in up.stderr if "error" in line]
    assert len(errors) == 1 and f"port {port + 2}" in errors[0], up.output()
    assert "bookie-2" in errors[0]
    assert not up.started() and not any(alive(p) for p in up.seen_pids)


class socket_listening:
    """A plain TCP listener on 127.0.0.1:port for the duration of a with-block."""

    def __init__(self, port: int):
        import socket

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(1)

    def __enter__(self) -> socket_listening:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def test_up_says_so_when_the_zookeeper_jar_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ZooKeeper jar: one line saying how to install it, exit 1, nothing started."""
    from services.cli.app import app

    monkeypatch.setattr(processes, "ZOOKEEPER_JAR", tmp_path / "missing" / "zookeeper.jar")
    port = free_port_block(8)
    result = CliRunner().invoke(
        app,
        [
            "up",
            "--data-dir", str(tmp_path / "data"),
            "--gateway-port", str(port),
            "--zk-port", str(free_port()),
        ],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "zookeeper.jar is missing" in result.output and "apt-get install zookeeper" in (
        result.output
    )
    assert not list((tmp_path / "data" / "logs").glob("bookie-*.log"))


def test_up_cannot_reach_the_given_zookeeper(run_up, tmp_path: Path) -> None:
    """--zk naming a port where nothing listens: one clear line, exit 1."""
    port = free_port_block(ports_needed(1))
    up = run_up(
        "--bookies", "1",
        "--data-dir", str(tmp_path / "data"),
        "--gateway-port", str(port),
        "--zk", f"127.0.0.1:{free_port()}",
    )  # fmt: skip
    assert up.proc.wait(60) == 1, up.output()
    up.drain()
    assert any("cannot reach ZooKeeper" in line for line in up.stderr), up.output()


def test_sigterm_while_starting_stops_what_started(run_up, tmp_path: Path) -> None:
    """SIGTERM before the cluster is ready: everything started so far is stopped, exit 0."""
    port = free_port_block(ports_needed(4))
    up = run_up(
        "--data-dir", str(tmp_path / "data"),
        "--gateway-port", str(port),
        "--zk-port", str(free_port()),
    )  # fmt: skip
    up.wait_line(r"^waiting for bookie-1", stream="stderr", deadline_s=START_DEADLINE_S)
    assert up.seen_pids, "ZooKeeper and the bookies should be running by now"
    assert up.stop(signal.SIGTERM) == 0, up.output()
    wait_for(lambda: not any(alive(p) for p in up.seen_pids), 10.0, "every child to be gone")
    assert not any(line.startswith("quire up: ready") for line in up.stdout)
