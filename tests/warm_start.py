"""Warm starts: the suite's services forked from an interpreter that has them imported.

A service started as ``python -m bookie`` spends about 0.8 s of CPU importing FastAPI,
pydantic, SQLAlchemy, kazoo and its own packages before ``main()`` runs; the suite
starts a few hundred, on two cores. Here one *zygote* per test process imports the four
services once, then forks a child for each start. The child is a real process of its
own, as with exec: its own pid and session, stdin from /dev/null, stdout and stderr
appended to its log, the environment asked for, and ``python -m MODULE ARGS`` run
through ``runpy`` as the interpreter would; it is signalled, paused and killed by pid
like any other. Only the interpreter's start is skipped.

What a fork cannot give a child, it gets from exec instead (``exec_child``):

- a program other than ``python -m`` one of ``MODULES``;
- an environment that changes what is read as the interpreter or the packages start
  (``PYTHON*``, ``QUIRE_NATIVE``): the zygote read its own;
- a zygote that failed (it says why, once, on stderr).

``QUIRE_TEST_EXEC=1`` turns warm starts off for a run: every service a new interpreter,
as ``quire up`` starts them.

The zygote is the children's parent, so it reaps them: a handle (``WarmChild``) learns
that its child ended from a pidfd, then asks the zygote for the exit status, which has
``subprocess.Popen``'s meaning (negative: the signal that ended it).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from services.cluster.processes import Child, exec_child

ROOT = Path(__file__).resolve().parent.parent
MODULES = ("bookie", "gateway", "auditor", "replicator")
EXEC_ENV = "QUIRE_TEST_EXEC"
# Read by the interpreter or by the packages as they are imported, not when main() runs.
IMPORT_TIME_PREFIXES = ("PYTHON",)
IMPORT_TIME_NAMES = ("QUIRE_NATIVE",)
ZYGOTE_READY_S = 60.0
REQUEST_TIMEOUT_S = 30.0
REQUEST_BYTES_MAX = 1 << 20
_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


def _receive(sock: socket.socket) -> dict[str, Any]:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the zygote closed the connection")
        data += chunk
        if len(data) > REQUEST_BYTES_MAX:
            raise ConnectionError("message too long")
    answer: dict[str, Any] = json.loads(data)
    return answer


# ---------------------------------------------------------------- the zygote


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _serve(socket_path: str, modules: Sequence[str]) -> dict[str, Any] | None:
    """Import ``modules``, then answer requests until told to stop (None). In a forked
    child, returns the request it was forked for."""
    _die_with_parent()
    for module in modules:
        # What ``python -m module`` imports; its __main__ itself runs afresh in each child.
        importlib.import_module(f"{module}.__main__")
        del sys.modules[f"{module}.__main__"]
    if threading.active_count() != 1:
        raise SystemExit(f"importing {modules} started threads: a fork would lose them")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(socket_path)
    server.listen(64)
    print(f"zygote {os.getpid()}: {', '.join(modules)} imported", flush=True)
    while True:
        conn, _ = server.accept()
        with conn:
            try:
                request = _receive(conn)
                op = request["op"]
                if op == "spawn":
                    pid = os.fork()
                    if pid == 0:
                        server.close()
                        conn.close()
                        return request
                    _send(conn, {"pid": pid})
                elif op == "reap":
                    _, status = os.waitpid(int(request["pid"]), 0)
                    _send(conn, {"code": os.waitstatus_to_exitcode(status)})
                elif op == "stop":
                    _send(conn, {})
                    return None
                else:
                    _send(conn, {"error": f"unknown op {op!r}"})
            except (OSError, ValueError, KeyError) as exc:
                with contextlib.suppress(OSError):
                    _send(conn, {"error": repr(exc)})


def _become(request: dict[str, Any]) -> None:
    """In the forked child: what Popen(start_new_session=True) and exec would have set
    up, then ``python -m MODULE ARGS``."""
    os.setsid()
    # ``ps -o comm`` and top name the service (the command line stays the zygote's)
    _libc().prctl(_PR_SET_NAME, request["argv"][2].encode()[:15], 0, 0, 0)
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # computed again from this environment's TMPDIR
    argv = request["argv"]
    sys.argv = ["-m", *argv[3:]]  # runpy puts the module's path first, as -m does
    runpy.run_module(argv[2], run_name="__main__", alter_sys=True)


def main() -> None:
    socket_path, *modules = sys.argv[1:]
    request = _serve(socket_path, modules)
    if request is not None:
        _become(request)


# ---------------------------------------------------------------- the test side


class WarmChild:
    """A child forked by the zygote, with ``subprocess.Popen``'s interface."""

    def __init__(self, starter: WarmStarter, pid: int, argv: Sequence[str]):
        self.starter = starter
        self.pid = pid
        self.args = list(argv)
        self.returncode: int | None = None
        self._pidfd: int | None = os.pidfd_open(pid)
        self._lock = threading.Lock()

    def _ended(self, timeout_s: float | None) -> bool:
        assert self._pidfd is not None
        poller = select.poll()
        poller.register(self._pidfd, select.POLLIN)
        ms = None if timeout_s is None else max(0, int(timeout_s * 1000))
        return bool(poller.poll(ms))

    def _reap(self) -> None:
        code = self.starter.request({"op": "reap", "pid": self.pid})["code"]
        self.returncode = int(code)
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def poll(self) -> int | None:
        with self._lock:
            if self.returncode is None and self._ended(0):
                self._reap()
            return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                if self.returncode is not None:
                    return self.returncode
                # a short slice at a time, so that a poll() in another thread gets a turn
                left = None if end is None else end - time.monotonic()
                slice_s = 0.2 if left is None else min(0.2, max(0.0, left))
                if self._ended(slice_s):
                    self._reap()
                    return self.returncode  # type: ignore[return-value]
            if end is not None and time.monotonic() >= end:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)

    def send_signal(self, sig: int) -> None:
        with self._lock:
            if self.returncode is not None or self._pidfd is None:
                return
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class WarmStarter:
    """The spawner the suite installs (``services.cluster.processes.set_spawner``): a
    zygote started on first use, exec for whatever it cannot start."""

    def __init__(self, modules: Sequence[str] = MODULES):
        self.modules = tuple(modules)
        self._lock = threading.Lock()
        self._zygote: subprocess.Popen[bytes] | None = None
        self._dir: str | None = None
        self._env: dict[str, str] = {}
        self._broken: str | None = None

    @property
    def socket_path(self) -> str:
        assert self._dir is not None
        return os.path.join(self._dir, "zygote.sock")

    def __call__(self, argv: Sequence[str], log_path: Path, env: dict[str, str]) -> Child:
        if not self._fits(argv, env) or not self._running():
            return exec_child(argv, log_path, env)
        request = {
            "op": "spawn",
            "argv": list(argv),
            "env": env,
            "cwd": os.getcwd(),
            "log": str(log_path),
        }
        return WarmChild(self, int(self.request(request)["pid"]), argv)

    def _fits(self, argv: Sequence[str], env: dict[str, str]) -> bool:
        if len(argv) < 3 or argv[0] != sys.executable or argv[1] != "-m":
            return False
        if argv[2] not in self.modules:
            return False
        base = self._env or self._zygote_env()
        for name in set(env) | set(base):
            if name.startswith(IMPORT_TIME_PREFIXES) or name in IMPORT_TIME_NAMES:
                if env.get(name) != base.get(name):
                    return False
        return True

    @staticmethod
    def _zygote_env() -> dict[str, str]:
        return {**os.environ, "PYTHONUNBUFFERED": "1"}

    def _running(self) -> bool:
        with self._lock:
            if self._broken is not None:
                return False
            if self._zygote is None:
                try:
                    self._start()
                except (OSError, RuntimeError) as exc:
                    self._give_up(f"the zygote did not start: {exc}")
                    return False
            zygote = self._zygote
            if zygote is None or zygote.poll() is not None:
                self._give_up(f"the zygote exited with {zygote and zygote.returncode}")
                return False
            return True

    def _give_up(self, why: str) -> None:
        self._broken = why
        print(f"warm starts off, services start with exec: {why}", file=sys.stderr, flush=True)

    def _start(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="quire-zygote-")
        self._env = self._zygote_env()
        log_path = os.path.join(self._dir, "zygote.log")
        with open(log_path, "ab") as log:
            self._zygote = subprocess.Popen(
                [sys.executable, "-u", "-m", "tests.warm_start", self.socket_path, *self.modules],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self._env,
                cwd=ROOT,  # where ``tests`` is a package, whatever the test's directory
                start_new_session=True,
            )
        end = time.monotonic() + ZYGOTE_READY_S
        while time.monotonic() < end:
            if self._zygote.poll() is not None:
                raise RuntimeError(
                    f"exited with {self._zygote.returncode}: "
                    f"{Path(log_path).read_text(errors='replace')[-2000:]}"
                )
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as probe:
                probe.connect(self.socket_path)
                return
            time.sleep(0.02)
        raise RuntimeError(f"not listening after {ZYGOTE_READY_S}s")

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(REQUEST_TIMEOUT_S)
            sock.connect(self.socket_path)
            _send(sock, message)
            answer = _receive(sock)
        if "error" in answer:
            raise RuntimeError(f"zygote: {answer['error']}")
        return answer

    def stop(self) -> None:
        """Stops the zygote (not its children: the tests that started them stop them)."""
        with self._lock:
            zygote, self._zygote = self._zygote, None
            if zygote is None:
                return
            if zygote.poll() is None:
                with contextlib.suppress(OSError, RuntimeError, ConnectionError):
                    self.request({"op": "stop"})
                try:
                    zygote.wait(5.0)
                except subprocess.TimeoutExpired:
                    zygote.kill()
                    zygote.wait()
            if self._dir is not None:
                with contextlib.suppress(OSError):
                    os.unlink(self.socket_path)
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self._dir, "zygote.log"))
                with contextlib.suppress(OSError):
                    os.rmdir(self._dir)


if __name__ == "__main__":
    main()
