"""Warm starts (tests/warm_start.py): a forked child is started, seen and ended as an
exec'd one is."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from services.cluster.processes import Child, exec_child
from tests.harness import wait_for
from tests.warm_start import ROOT, WarmChild, WarmStarter

PROBE = "tests.warm_probe"


@pytest.fixture(scope="module")
def starter() -> Iterator[WarmStarter]:
    with pytest.MonkeyPatch.context() as patch:
        # the probe is found from any directory, by the zygote and by exec alike
        patch.setenv("PYTHONPATH", str(ROOT))
        warm = WarmStarter(modules=(PROBE,))
        yield warm
        warm.stop()


def probe(code: str) -> list[str]:
    return [sys.executable, "-m", PROBE, code]


def seen(log: Path) -> dict[str, Any]:
    first, *rest = log.read_text().splitlines()
    assert rest == ["to stderr"], rest
    return dict(json.loads(first))


def env_with(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PROBE_ABSENT"}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def test_a_warm_child_sees_what_an_exec_d_one_sees(
    starter: WarmStarter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROBE_ABSENT", "the test process has it, the children do not")
    monkeypatch.chdir(tmp_path)
    children: dict[str, Child] = {
        "warm": starter(probe("7"), tmp_path / "warm.log", env_with(PROBE="p")),
        "exec": exec_child(probe("7"), tmp_path / "exec.log", env_with(PROBE="p")),
    }
    assert isinstance(children["warm"], WarmChild)
    assert isinstance(children["exec"], subprocess.Popen)
    assert {name: child.wait(30) for name, child in children.items()} == {"warm": 7, "exec": 7}
    warm, exec_d = seen(tmp_path / "warm.log"), seen(tmp_path / "exec.log")
    for key in ("argv", "main", "cwd", "probe", "absent", "session", "stdin"):
        assert warm[key] == exec_d[key], key
    assert warm["argv"][1:] == ["7"] and warm["argv"][0].endswith("warm_probe/__main__.py")
    assert (warm["main"], warm["cwd"], warm["probe"]) == ("__main__", str(tmp_path), "p")
    assert warm["absent"] is None and warm["session"] is True and warm["stdin"] == ""


def test_two_warm_children_draw_different_random_numbers(
    starter: WarmStarter, tmp_path: Path
) -> None:
    first = starter(probe("0"), tmp_path / "1.log", env_with())
    second = starter(probe("0"), tmp_path / "2.log", env_with())
    assert (first.wait(30), second.wait(30)) == (0, 0)
    one, two = seen(tmp_path / "1.log"), seen(tmp_path / "2.log")
    assert one["random"] != two["random"], "the module's random state was copied"
    assert one["jitter"] != two["jitter"], "the web server's jitter was copied"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_signalled_warm_child_ends_as_popen_reports_it(
    starter: WarmStarter, tmp_path: Path, sig: signal.Signals
) -> None:
    child = starter(probe("wait"), tmp_path / "w.log", env_with())
    wait_for(lambda: (tmp_path / "w.log").read_text().count("\n") == 2, 30, "the probe runs")
    assert child.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(0.1)
    child.send_signal(signal.SIGSTOP)
    wait_for(lambda: psutil.Process(child.pid).status() == psutil.STATUS_STOPPED, 10, "stop")
    child.send_signal(signal.SIGCONT)
    child.send_signal(sig)
    assert child.wait(30) == -sig
    assert child.poll() == -sig
    child.kill()  # after the end: nothing to signal, no error
    assert not psutil.pid_exists(child.pid), "reaped, no zombie left"


def test_what_a_fork_cannot_give_is_started_with_exec(starter: WarmStarter, tmp_path: Path) -> None:
    other_program = [sys.executable, "-c", "raise SystemExit(4)"]
    other_module = [sys.executable, "-m", "json.tool", "--help"]
    other_hash_seed = env_with(PYTHONHASHSEED="123")
    other_native = env_with(QUIRE_NATIVE="0" if os.environ.get("QUIRE_NATIVE") != "0" else "1")
    for argv, env in [
        (other_program, env_with()),
        (other_module, env_with()),
        (probe("0"), other_hash_seed),
        (probe("0"), other_native),
    ]:
        child = starter(argv, tmp_path / "x.log", env)
        assert isinstance(child, subprocess.Popen), (argv, env.get("PYTHONHASHSEED"))
        child.wait(30)


def test_a_zygote_that_cannot_start_leaves_every_start_to_exec(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    broken = WarmStarter(modules=("tests.no_such_module",))
    try:
        argv = [sys.executable, "-m", "tests.no_such_module"]
        child = broken(argv, tmp_path / "b.log", env_with())
        assert isinstance(child, subprocess.Popen)
        assert child.wait(30) == 1
    finally:
        broken.stop()
    assert "warm starts off, services start with exec: the zygote did not start" in (
        capfd.readouterr().err
    )
