"""What every ``quire`` command shares: the global options and the one-line failure.

A module of its own so that ``services/cli/app.py`` can register the sub-apps
(``cli_ledger``, ``cli_bench``, ...) that use these without an import cycle,
also when it runs as ``python -m services.cli.app``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer
from rich.console import Console

if TYPE_CHECKING:
    from services.zk.auth import ZkCredentials

DEFAULT_GATEWAY = "http://127.0.0.1:8080"

_err = Console(stderr=True, highlight=False, soft_wrap=True)


@dataclass(frozen=True, slots=True)
class GlobalOptions:
    gateway: str
    token: str | None
    ca_file: Path | None = None  # --ca-file / QUIRE_CA_FILE: verifies an https:// gateway


def fail(message: str, code: int = 1, prog: str = "quire") -> NoReturn:
    """One line on stderr, then exit with ``code``."""
    _err.print(f"{prog}: error: {message}", markup=False)
    raise typer.Exit(code)


def human_bytes(size: int | None) -> str:
    """``size`` bytes for people (binary units); ``-`` when unknown."""
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover - the loop always returns


def global_options(ctx: typer.Context) -> GlobalOptions:
    """The resolved ``--gateway`` / ``--token`` / ``--ca-file`` of this invocation."""
    root = ctx.find_root()
    if isinstance(root.obj, GlobalOptions):
        return root.obj
    return GlobalOptions(DEFAULT_GATEWAY, None)


def check_zk(
    zk: str | None,
    zk_root: str,
    session_timeout: float | None = None,
    auth_file: Path | None = None,
) -> ZkCredentials | None:
    """Refuse impossible ZooKeeper options with the same rules the services apply; the
    ZooKeeper credentials of ``auth_file`` or ``QUIRE_ZK_AUTH`` (docs/security.md,
    "ZooKeeper authentication"), None without either."""
    from pydantic import ValidationError

    from services.settings import CommonSettings

    values: dict[str, object] = {"zk_root": zk_root, "zk_auth_file": auth_file}
    if zk is not None:
        values["zk"] = zk
    if session_timeout is not None:
        values["zk_session_timeout"] = session_timeout
    try:
        settings = CommonSettings.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = first.get("loc", ())
        # A check of several options together (a model validator) names them itself.
        where = "--" + "-".join(str(p) for p in loc).replace("_", "-") + ": " if loc else ""
        msg = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
        raise typer.BadParameter(f"{where}{msg}") from None
    return settings.zk_credentials
