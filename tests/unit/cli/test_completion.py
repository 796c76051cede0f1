"""Shell completion of `quire` is on (typer's --install-completion / --show-completion):
the completion protocol answers with the commands, and the scripts name `quire`."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from services.cli.app import app


def test_help_offers_completion() -> None:
    result = CliRunner().invoke(app, ["--help"], prog_name="quire")
    assert result.exit_code == 0
    assert "--install-completion" in result.stdout and "--show-completion" in result.stdout


def test_bash_completion_completes_commands_and_options() -> None:
    env = {"_QUIRE_COMPLETE": "complete_bash", "COMP_WORDS": "quire sta", "COMP_CWORD": "1"}
    result = CliRunner().invoke(app, [], env=env, prog_name="quire")
    assert result.exit_code == 0 and result.stdout.split() == ["status"]
    env = {**env, "COMP_WORDS": "quire status --j", "COMP_CWORD": "2"}
    result = CliRunner().invoke(app, [], env=env, prog_name="quire")
    assert result.stdout.split() == ["--json"]


def test_show_completion_scripts_for_bash_and_zsh(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scripts docs/cli.md tells people to install (the shell named, not detected)."""
    # Read when the command is built, before CliRunner applies its env.
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    bash = CliRunner().invoke(app, ["--show-completion", "bash"], prog_name="quire")
    assert bash.exit_code == 0 and "complete -o default -F _quire_completion quire" in bash.stdout
    zsh = CliRunner().invoke(app, ["--show-completion", "zsh"], prog_name="quire")
    assert zsh.exit_code == 0 and zsh.stdout.startswith("#compdef quire")
