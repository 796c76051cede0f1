"""The run's secrets never show in the run's logs (docs/security.md, "What is tested").

The suite starts every process through one spawner (``services.cluster.processes.
set_spawner``); ``SecretRecorder`` wraps it and notes, for each process, its log file
and the secrets it was handed: the values of ``--cluster-secret``, ``--api-token`` and
``--admin-token`` (flags or their ``QUIRE_*`` variables) and the password of its
ZooKeeper credentials (``QUIRE_ZK_AUTH``, or the file of ``--zk-auth-file`` /
``QUIRE_ZK_AUTH_FILE``). When the session ends, ``leaks`` searches every log noted for
every secret noted, raw and URL-encoded: a secret one process was given must not show in
the log of any (tests/conftest.py fails the run and names the file). Processes started
with a spawner of their own (the hosts of tests/multihost/) are not seen; the other
encodings, error bodies, metrics and OpenAPI documents are searched by
tests/integration/test_secrets_never_leak.py.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from services.cluster.processes import Child, Spawner

SECRET_FLAGS = {
    "--cluster-secret": "QUIRE_CLUSTER_SECRET",
    "--api-token": "QUIRE_API_TOKEN",
    "--admin-token": "QUIRE_ADMIN_TOKEN",
}
ZK_AUTH_FILE_FLAG, ZK_AUTH_FILE_ENV, ZK_AUTH_ENV = (
    "--zk-auth-file",
    "QUIRE_ZK_AUTH_FILE",
    "QUIRE_ZK_AUTH",
)
# Shorter values ("s", "tok") show in logs by chance; the suite's secrets are longer.
SECRET_MIN_CHARS = 8
ZK_AUTH_FILE_MAX_BYTES = 4096


def _flag_values(argv: Sequence[str], flag: str) -> list[str]:
    """Every value given to ``flag``, as ``--flag VALUE`` or ``--flag=VALUE``."""
    values = []
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            values.append(argv[i + 1])
        elif arg.startswith(f"{flag}="):
            values.append(arg.partition("=")[2])
    return values


def _zk_password(line: str) -> str | None:
    user, colon, password = line.strip().partition(":")
    return password if colon and user else None


def secrets_of(argv: Sequence[str], env: dict[str, str]) -> set[str]:
    """The secrets a process started with ``argv`` and ``env`` is handed (module
    docstring); a credentials file that cannot be read hands none."""
    found: set[str] = set()
    for flag, variable in SECRET_FLAGS.items():
        found.update(_flag_values(argv, flag))
        if env.get(variable):
            found.add(env[variable])
    if env.get(ZK_AUTH_ENV):
        found.add(_zk_password(env[ZK_AUTH_ENV]) or "")
    files = _flag_values(argv, ZK_AUTH_FILE_FLAG)
    if env.get(ZK_AUTH_FILE_ENV):
        files.append(env[ZK_AUTH_FILE_ENV])
    for name in files:
        try:
            with open(name, "rb") as f:
                text = f.read(ZK_AUTH_FILE_MAX_BYTES).decode("utf-8", errors="replace")
        except OSError:
            continue
        found.add(_zk_password(text.splitlines()[0] if text else "") or "")
    return {s for s in found if len(s) >= SECRET_MIN_CHARS}


class SecretRecorder:
    """A spawner that notes each process's log and secrets, then starts it with
    ``inner``."""

    def __init__(self, inner: Spawner):
        self.inner = inner
        self.logs: set[Path] = set()
        self.secrets: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, argv: Sequence[str], log_path: Path, env: dict[str, str]) -> Child:
        secrets = secrets_of(argv, env)
        with self._lock:
            self.logs.add(Path(log_path))
            self.secrets |= secrets
        return self.inner(argv, log_path, env)

    def leaks(self) -> list[str]:
        """``PATH: N secret(s)`` for each log noted that holds a secret noted (never the
        secret itself: this goes to the run's output)."""
        with self._lock:
            logs, secrets = sorted(self.logs), set(self.secrets)
        forms = {s.encode() for s in secrets} | {quote(s, safe="").encode() for s in secrets}
        found = []
        for path in logs:
            try:
                text = path.read_bytes()
            except OSError:
                continue  # a test's directory removed by the test
            hits = sum(1 for form in forms if form in text)
            if hits:
                found.append(f"{path}: {hits} form(s) of the run's secrets")
        return found
