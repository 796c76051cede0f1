"""`quire bookie format`: asks first (refuses when nobody can answer), then lets a bookie
whose data dir was wiped start again as an empty bookie."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

from kazoo.client import KazooClient
from typer.testing import CliRunner, Result

from services.cli.app import app
from services.cluster.processes import ServiceProcess
from tests.harness import Cluster

EXIT_REFUSED = 3  # python -m bookie: cookie refusal


def _quire() -> list[str]:
    script = Path(sys.executable).parent / "quire"
    return [str(script)] if script.exists() else [sys.executable, "-m", "services.cli"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("QUIRE_")}


def format_cmd(cluster: Cluster, bookie_id: str, data_dir: Path, *extra: str) -> list[str]:
    return [*_quire(), *format_args(cluster, bookie_id, data_dir, *extra)]


def format_args(cluster: Cluster, bookie_id: str, data_dir: Path, *extra: str) -> list[str]:
    return [
        "bookie", "format",
        "--data-dir", str(data_dir),
        "--bookie-id", bookie_id,
        "--zk", cluster.zk_connect,
        "--zk-root", cluster.zk_root,
        *extra,
    ]  # fmt: skip


def run_format(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run with stdin that is not a terminal."""
    return subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=_env()
    )


def invoke_format(args: list[str]) -> Result:
    """Run in this process through typer's CliRunner (stdin is not a terminal; click 8.2+:
    stdout and stderr kept apart), where the process boundary shows nothing more."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("QUIRE_")}
    return CliRunner().invoke(app, args, prog_name="quire", env=unset)


def run_format_on_a_terminal(argv: list[str], answer: str) -> subprocess.CompletedProcess[str]:
    """Run with a pseudo-terminal as stdin and type ``answer`` at the prompt."""
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=secondary,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        os.close(secondary)
        secondary = -1
        os.write(primary, f"{answer}\n".encode())
        out, err = proc.communicate(timeout=60)
    finally:
        if secondary != -1:
            os.close(secondary)
        os.close(primary)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def wiped_bookie(cluster: Cluster, data_dir: Path) -> ServiceProcess:
    """A bookie that ran on ``data_dir``, stopped, whose data dir was then emptied."""
    proc = cluster.start_bookie(data_dir=data_dir)
    proc.stop()
    for child in data_dir.iterdir():
        if child.is_dir():
            shutil.rmtree(child)
        else:
            child.unlink()
    return proc


def test_format_without_force_refuses_when_stdin_is_not_a_terminal(
    cluster: Cluster, zk_client: KazooClient, tmp_path: Path
) -> None:
    """No terminal and no --force: refuse with a clear message, change nothing; --force formats,
    and the bookie that refused to start on its wiped data dir starts."""
    data_dir = tmp_path / "bookie"
    proc = wiped_bookie(cluster, data_dir)
    proc.start()
    assert proc.proc is not None and proc.proc.wait(60) == EXIT_REFUSED
    (data_dir / "keep-me").write_text("still here")
    cookie = f"/cookies/{proc.address}"
    assert zk_client.exists(cookie)

    refused = run_format(format_cmd(cluster, proc.address, data_dir))
    assert refused.returncode == 1, refused
    assert "--force" in refused.stderr and "not a terminal" in refused.stderr
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert (data_dir / "keep-me").exists() and zk_client.exists(cookie)

    done = run_format(format_cmd(cluster, proc.address, data_dir, "--force"))
    assert done.returncode == 0, done
    assert f"formatted bookie {proc.address}" in done.stdout
    assert list(data_dir.iterdir()) == [] and not zk_client.exists(cookie)

    proc.start()
    proc.wait_healthy(30.0)
    assert zk_client.exists(cookie) and zk_client.exists(f"/bookies/{proc.address}")


def test_format_asks_on_a_terminal(
    cluster: Cluster, zk_client: KazooClient, tmp_path: Path
) -> None:
    """On a terminal it asks: "n" changes nothing, "y" formats."""
    data_dir = tmp_path / "bookie"
    proc = wiped_bookie(cluster, data_dir)
    (data_dir / "keep-me").write_text("still here")
    cookie = f"/cookies/{proc.address}"

    declined = run_format_on_a_terminal(format_cmd(cluster, proc.address, data_dir), "n")
    assert declined.returncode == 1, declined
    assert "nothing changed" in declined.stderr
    assert (data_dir / "keep-me").exists() and zk_client.exists(cookie)

    accepted = run_format_on_a_terminal(format_cmd(cluster, proc.address, data_dir), "y")
    assert accepted.returncode == 0, accepted
    assert not (data_dir / "keep-me").exists() and not zk_client.exists(cookie)
    proc.start()
    proc.wait_healthy(30.0)


def test_format_refuses_a_running_bookie(
    cluster: Cluster, zk_client: KazooClient, tmp_path: Path
) -> None:
    """A running (registered) bookie is never formatted, even with --force."""
    data_dir = tmp_path / "bookie"
    proc = cluster.start_bookie(data_dir=data_dir)
    result = invoke_format(format_args(cluster, proc.address, data_dir, "--force"))
    assert result.exit_code == 1, (result.exit_code, result.stdout, result.stderr)
    assert "registered" in result.stderr or "running" in result.stderr
    assert (data_dir / "cookie.json").exists()
    assert zk_client.exists(f"/cookies/{proc.address}")


def test_format_checks_its_arguments(cluster: Cluster, tmp_path: Path) -> None:
    """A bookie id that is not HOST:PORT is a usage error (exit 2), before any prompt."""
    result = invoke_format(format_args(cluster, "no-port", tmp_path / "bookie", "--force"))
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert "HOST:PORT" in result.stderr
