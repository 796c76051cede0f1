"""Settings of every service and of the ``quire`` command line (docs/api.md, "Processes")."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from services.cli.app import DEFAULT_GATEWAY, app
from services.ledger_client.settings import LedgerClientSettings
from services.settings import (
    AuditorSettings,
    BookieSettings,
    CommonSettings,
    GatewaySettings,
    ReplicatorSettings,
    load_settings,
)

REPO = Path(__file__).resolve().parents[2]
SERVICE_MODULES = ("bookie", "gateway", "auditor", "replicator")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No QUIRE_* variable of the machine running the tests leaks in."""
    for name in list(os.environ):
        if name.startswith("QUIRE_"):
            monkeypatch.delenv(name)


def test_defaults_follow_api_md() -> None:
    """With no flag and no variable, every default is the one docs/api.md states."""
    bookie = load_settings(BookieSettings, [])
    gateway = load_settings(GatewaySettings, [])
    auditor = load_settings(AuditorSettings, [])
    replicator = load_settings(ReplicatorSettings, [])
    assert (bookie.port, gateway.port, auditor.port, replicator.port) == (3181, 8080, 8091, 8092)
    for settings in (bookie, gateway, auditor, replicator):
        assert settings.zk == "127.0.0.1:2181"
        assert settings.zk_root == "/quire"
        assert settings.host == "127.0.0.1"
        assert settings.zk_session_timeout == 10
        assert settings.cluster_secret is None
    assert auditor.lost_bookie_delay == 30
    assert auditor.audit_interval == 600
    assert replicator.open_ledger_grace == 30
    assert bookie.readonly_free_ratio == 0.05
    assert bookie.journal_sync is True
    assert gateway.api_token is None and gateway.admin_token is None


def test_the_gateway_flags_of_the_ledger_client_default_to_its_defaults() -> None:
    """The gateway's flags of the ledger client's bounds carry the client's names and
    defaults (services/ledger_client/settings.py), so a client built without flags (the
    replication worker's) runs with the bounds a gateway has by default; a flag reaches
    the client."""
    assert load_settings(GatewaySettings, []).ledger_client() == LedgerClientSettings()
    tuned = load_settings(GatewaySettings, ["--recovery-timeout-ms", "5000"]).ledger_client()
    assert tuned.recovery_timeout_ms == 5000


def test_environment_variable_sets_an_option(monkeypatch: pytest.MonkeyPatch) -> None:
    """QUIRE_<OPTION> (upper case, dashes to underscores) sets the option."""
    monkeypatch.setenv("QUIRE_PORT", "4001")
    monkeypatch.setenv("QUIRE_ZK_ROOT", "/elsewhere")
    monkeypatch.setenv("QUIRE_READONLY_FREE_RATIO", "0.2")
    monkeypatch.setenv("QUIRE_JOURNAL_SYNC", "false")
    monkeypatch.setenv("QUIRE_LOST_BOOKIE_DELAY", "5")
    bookie = load_settings(BookieSettings, [])
    assert (bookie.port, bookie.zk_root, bookie.readonly_free_ratio) == (4001, "/elsewhere", 0.2)
    assert bookie.journal_sync is False
    assert load_settings(AuditorSettings, []).lost_bookie_delay == 5


def test_flag_wins_over_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """A flag given on the command line beats the QUIRE_* variable of the same option."""
    monkeypatch.setenv("QUIRE_PORT", "4001")
    monkeypatch.setenv("QUIRE_ZK", "10.0.0.1:2181")
    monkeypatch.setenv("QUIRE_JOURNAL_SYNC", "false")
    monkeypatch.setenv("QUIRE_OPEN_LEDGER_GRACE", "99")
    bookie = load_settings(
        BookieSettings, ["--port", "4002", "--zk", "127.0.0.1:2182", "--journal-sync"]
    )
    assert (bookie.port, bookie.zk, bookie.journal_sync) == (4002, "127.0.0.1:2182", True)
    replicator = load_settings(ReplicatorSettings, ["--open-ledger-grace", "7"])
    assert replicator.open_ledger_grace == 7


def test_journal_sync_can_be_turned_off() -> None:
    """--no-journal-sync turns fsync-before-ack off."""
    assert load_settings(BookieSettings, ["--no-journal-sync"]).journal_sync is False


def test_zk_connection_string_and_chroot() -> None:
    """An ensemble connection string is kept; the chroot is appended for kazoo."""
    settings = load_settings(
        GatewaySettings, ["--zk", "zk1:2181, zk2:2181,zk3:2181", "--zk-root", "/a/b"]
    )
    assert settings.zk == "zk1:2181,zk2:2181,zk3:2181"
    assert settings.zk_hosts == "zk1:2181,zk2:2181,zk3:2181/a/b"
    assert load_settings(GatewaySettings, ["--zk-root", "/"]).zk_hosts == "127.0.0.1:2181"


@pytest.mark.parametrize(
    ("cls", "argv", "option"),
    [
        (BookieSettings, ["--port", "70000"], "--port"),
        (BookieSettings, ["--port", "0"], "--port"),
        (GatewaySettings, ["--port", "eighty"], "--port"),
        (GatewaySettings, ["--zk", "localhost"], "--zk"),
        (GatewaySettings, ["--zk", "localhost:99999"], "--zk"),
        (GatewaySettings, ["--zk-root", "quire"], "--zk-root"),
        (GatewaySettings, ["--zk-root", "/quire/"], "--zk-root"),
        (AuditorSettings, ["--zk-session-timeout", "0"], "--zk-session-timeout"),
        (AuditorSettings, ["--lost-bookie-delay", "-1"], "--lost-bookie-delay"),
        (AuditorSettings, ["--audit-interval", "0"], "--audit-interval"),
        (ReplicatorSettings, ["--open-ledger-grace", "-5"], "--open-ledger-grace"),
        (BookieSettings, ["--readonly-free-ratio", "1.5"], "--readonly-free-ratio"),
        (BookieSettings, ["--log-level", "loud"], "--log-level"),
    ],
)
def test_impossible_value_exits_2_with_one_line(
    cls: type[CommonSettings], argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An impossible value is refused at start-up: exit 2, one line on stderr naming it."""
    with pytest.raises(SystemExit) as exc:
        load_settings(cls, argv, prog="svc")
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("svc: error: ") and option in err, err


def test_impossible_environment_value_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An impossible QUIRE_* value is refused the same way as a flag."""
    monkeypatch.setenv("QUIRE_PORT", "123456")
    with pytest.raises(SystemExit) as exc:
        load_settings(GatewaySettings, [], prog="gateway")
    assert exc.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_zk_credentials_come_from_a_file_or_a_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/api.md, "Processes and how they start": --zk-auth-file (QUIRE_ZK_AUTH_FILE) or
    QUIRE_ZK_AUTH; neither means no credentials (open ACLs, as before)."""
    assert load_settings(BookieSettings, []).zk_credentials is None
    path = tmp_path / "zk-auth"
    path.write_text("quire:from-file\n")
    by_flag = load_settings(BookieSettings, ["--zk-auth-file", str(path)]).zk_credentials
    assert by_flag is not None and by_flag.password.get_secret_value() == "from-file"
    monkeypatch.setenv("QUIRE_ZK_AUTH_FILE", str(path))
    by_file_variable = load_settings(AuditorSettings, []).zk_credentials
    assert by_file_variable is not None and by_file_variable.user == "quire"
    monkeypatch.delenv("QUIRE_ZK_AUTH_FILE")
    monkeypatch.setenv("QUIRE_ZK_AUTH", "other:from-variable")
    by_variable = load_settings(ReplicatorSettings, []).zk_credentials
    assert by_variable is not None and by_variable.user == "other"


def test_zk_credentials_are_never_a_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """A password on a command line is visible to every user of the host: there is no
    --zk-auth, so giving one stops the service (exit 2)."""
    with pytest.raises(SystemExit) as exc:
        load_settings(GatewaySettings, ["--zk-auth", "quire:secret"], prog="gateway")
    assert exc.value.code == 2
    assert "--zk-auth" not in capsys.readouterr().out


def test_zk_credentials_show_in_no_repr_dump_or_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The password is in no repr or dump of the settings, and a refused value is named
    by its source in one line, never quoted."""
    monkeypatch.setenv("QUIRE_ZK_AUTH", "quire:hunter2-secret")
    settings = load_settings(GatewaySettings, [])
    for text in (repr(settings), str(settings), settings.model_dump_json()):
        assert "hunter2" not in text
    assert "hunter2" not in repr(settings.zk_credentials)
    monkeypatch.setenv("QUIRE_ZK_AUTH", "no-colon-hunter2")
    with pytest.raises(SystemExit) as exc:
        load_settings(GatewaySettings, [], prog="gateway")
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err == "gateway: error: QUIRE_ZK_AUTH must hold one line USER:PASSWORD\n"
    path = tmp_path / "zk-auth"
    path.write_text("quire:from-file")
    with pytest.raises(SystemExit):
        load_settings(GatewaySettings, ["--zk-auth-file", str(path)], prog="gateway")
    assert "not both" in capsys.readouterr().err


# -- the quire command line -------------------------------------------------


def _globals(argv: list[str]) -> dict:
    """The global options ``quire`` resolves for ``argv`` (flags, then QUIRE_*, then defaults)."""
    group = typer.main.get_command(app)
    with group.make_context("quire", argv) as ctx:
        return dict(ctx.params)


def test_cli_global_defaults() -> None:
    """Without flags or variables the gateway is http://127.0.0.1:8080 and there is no token
    and no CA bundle."""
    params = _globals(["up", "--help"])
    assert params == {"gateway": DEFAULT_GATEWAY, "token": None, "ca_file": None}


def test_cli_global_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """QUIRE_GATEWAY, QUIRE_TOKEN and QUIRE_CA_FILE set the global options."""
    (tmp_path / "ca.pem").write_text("")
    monkeypatch.setenv("QUIRE_GATEWAY", "http://gw.example:9000")
    monkeypatch.setenv("QUIRE_TOKEN", "from-env")
    monkeypatch.setenv("QUIRE_CA_FILE", str(tmp_path / "ca.pem"))
    assert _globals(["up"]) == {
        "gateway": "http://gw.example:9000",
        "token": "from-env",
        "ca_file": tmp_path / "ca.pem",
    }


def test_cli_global_flag_wins_over_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """--gateway and --token before the subcommand beat QUIRE_GATEWAY and QUIRE_TOKEN."""
    monkeypatch.setenv("QUIRE_GATEWAY", "http://gw.example:9000")
    monkeypatch.setenv("QUIRE_TOKEN", "from-env")
    params = _globals(["--gateway", "http://127.0.0.1:9999", "--token", "from-flag", "up"])
    assert params == {"gateway": "http://127.0.0.1:9999", "token": "from-flag", "ca_file": None}


def _invoke(argv: list[str]) -> Result:
    """Run ``quire argv`` in this process (click 8.2+: stdout and stderr kept apart)."""
    return CliRunner().invoke(app, argv, prog_name="quire")


@pytest.mark.parametrize(
    "argv",
    [[], ["up"], ["bookie"], ["bookie", "format"], ["zk"], ["zk", "lock"], ["zk", "unlock"]],
    ids=["quire", "up", "bookie", "bookie-format", "zk", "zk-lock", "zk-unlock"],
)
def test_cli_help_exits_0(argv: list[str]) -> None:
    """`quire ... --help` works for every command."""
    result = _invoke([*argv, "--help"])
    assert result.exit_code == 0, result.stderr
    assert "Usage" in result.stdout


def test_cli_module_help_in_a_subprocess() -> None:
    """`python -m services.cli --help` runs as a process of its own and exits 0 (the help
    of every command is checked in-process above; this is the entry point itself)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUIRE_")}
    result = subprocess.run(
        [sys.executable, "-m", "services.cli", "--help"],
        capture_output=True, text=True, timeout=60, cwd=REPO, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout


def test_cli_rejects_a_bad_gateway_url() -> None:
    """A --gateway that is not an http(s) URL is a usage error (exit 2)."""
    result = _invoke(["--gateway", "nope", "up"])
    assert result.exit_code == 2


def test_cli_up_rejects_impossible_zookeeper_options(tmp_path: Path) -> None:
    """quire up refuses an impossible --zk or --zk-root before it starts anything."""
    for bad in (["--zk", "nohostport"], ["--zk-root", "relative"]):
        result = _invoke(["up", "--data-dir", str(tmp_path), *bad])
        assert result.exit_code == 2, result.stderr
        assert not (tmp_path / "logs").exists()


def test_cli_zk_commands_need_credentials_and_a_chroot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """quire zk lock|unlock, and bookie format, read the credentials as the services do;
    lock and unlock refuse to run without them or on ZooKeeper's own root, before they
    connect to anything."""
    for command in ("lock", "unlock"):
        result = _invoke(["zk", command, "--zk", "127.0.0.1:1"])
        assert result.exit_code == 1
        assert "--zk-auth-file or QUIRE_ZK_AUTH" in result.stderr
    monkeypatch.setenv("QUIRE_ZK_AUTH", "quire:secret")
    result = _invoke(["zk", "lock", "--zk", "127.0.0.1:1", "--zk-root", "/"])
    assert result.exit_code == 1 and "chroot of its own" in result.stderr
    monkeypatch.setenv("QUIRE_ZK_AUTH", "malformed")
    result = _invoke(["zk", "lock"])
    assert result.exit_code == 2 and "USER:PASSWORD" in result.stderr
    monkeypatch.delenv("QUIRE_ZK_AUTH")
    missing = "no-such-file"  # short: the error box wraps a long line
    result = _invoke(
        ["bookie", "format", "--data-dir", str(tmp_path), "--bookie-id", "h:1"]
        + ["--zk-auth-file", missing, "--force"]
    )
    assert result.exit_code == 2 and "no such file" in result.stderr


@pytest.mark.parametrize("module", SERVICE_MODULES)
def test_service_help_exits_0(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m <service> --help` exits 0 (once the service exists). The service's
    ``main`` runs in-process with ``--help``; the harness starts every service through
    ``python -m`` as a process of its own."""
    try:
        exists = importlib.util.find_spec(f"{module}.__main__") is not None
    except ImportError:  # no package at all (a fresh clone has no empty directories)
        exists = False
    if not exists:
        pytest.skip(f"{module}/__main__.py does not exist yet")
    main = importlib.import_module(f"{module}.__main__").main
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    out = capsys.readouterr()
    assert exc.value.code in (0, None), out.err
    assert "--zk" in out.out and "--port" in out.out


def test_quire_up_defaults_follow_api_md() -> None:
    """docs/api.md: `quire up` starts four bookies by default (one more than the default
    ensemble) on P+1..P+N, the gateway on P=8080, the auditor on P+N+1 and the replicator
    on P+N+2."""
    import inspect

    from services.cli.up import up
    from services.cluster.config import SERVICES, UpConfig

    assert inspect.signature(up).parameters["bookies"].default == 4
    assert inspect.signature(up).parameters["gateway_port"].default == 8080
    assert UpConfig(data_dir=Path(".")).bookies == 4
    ports = {spec.name: spec.port(8080, 4) for spec in SERVICES}
    assert ports == {"gateway": 8080, "auditor": 8085, "replicator": 8086}
