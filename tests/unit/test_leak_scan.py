"""The run-wide secret scan (tests/leak_scan.py): which secrets a started process is
handed, and a log holding one, raw or URL-encoded, reported by its path alone."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from services.cluster.processes import Child
from tests.leak_scan import SecretRecorder, secrets_of


def test_secrets_come_from_flags_variables_and_the_credentials_file(tmp_path: Path) -> None:
    """The values of the secret flags (both spellings), their variables, and the
    password of the ZooKeeper credentials from the variable or the file; short values
    and other flags are not secrets."""
    auth = tmp_path / "zk-auth"
    auth.write_text("quire:file-password-1234\n")
    argv = [
        "python", "-m", "gateway",
        "--api-token", "api-token-abcdef", "--admin-token=admin-token-abcdef",
        "--cluster-secret", "short", "--zk-auth-file", str(auth), "--host", "somewhere-long",
    ]  # fmt: skip
    env = {"QUIRE_CLUSTER_SECRET": "env-secret-abcdef", "QUIRE_ZK_AUTH": "u:env-zk-pw-abcdef"}
    assert secrets_of(argv, env) == {
        "api-token-abcdef",
        "admin-token-abcdef",
        "file-password-1234",
        "env-secret-abcdef",
        "env-zk-pw-abcdef",
    }
    assert secrets_of(["--zk-auth-file", str(tmp_path / "missing")], {}) == set()


def test_a_log_holding_a_secret_is_reported_without_the_secret(tmp_path: Path) -> None:
    """Each process's log is noted: the one that holds a secret of any process, raw or
    URL-encoded, is reported by its path, and the report never holds the secret."""
    started: list[Sequence[str]] = []

    def spawner(argv: Sequence[str], log_path: Path, env: dict[str, str]) -> Child:
        started.append(argv)
        return subprocess.Popen(["true"])

    recorder = SecretRecorder(spawner)
    logs = [tmp_path / f"{n}.log" for n in range(3)]
    recorder(["bookie", "--cluster-secret", "cluster/secret+1"], logs[0], {}).wait()
    recorder(["gateway", "--api-token", "api-token-xyz1"], logs[1], {}).wait()
    recorder(["auditor"], logs[2], {}).wait()
    assert len(started) == 3
    logs[0].write_text("bookie started\n")
    logs[1].write_text("nothing to see\n")
    logs[2].write_text("GET /x?s=cluster%2Fsecret%2B1\n")
    assert recorder.leaks() == [f"{logs[2]}: 1 form(s) of the run's secrets"]
    logs[1].write_text("token api-token-xyz1\n")
    leaks = recorder.leaks()
    assert [leak.split(":")[0] for leak in leaks] == [str(logs[1]), str(logs[2])]
    assert not any("api-token-xyz1" in leak or "cluster" in leak for leak in leaks)
