"""The ``quire`` command line.

Global options come before the subcommand: ``--gateway URL`` (env
``QUIRE_GATEWAY``, default ``http://127.0.0.1:8080``), ``--token`` (env
``QUIRE_TOKEN``) and ``--ca-file`` (env ``QUIRE_CA_FILE``: the CA bundle an
``https://`` gateway's certificate is verified against, instead of the system's); a
flag wins over its variable. Commands that talk to a
gateway read them with ``global_options(ctx)`` (``services/cli/common.py``,
which sub-apps import, so there is no import cycle).

Commands: ``quire up`` (a local cluster, ``services/cluster/local.py``), ``quire
ledger ...`` (``services/cli/ledger.py``), ``quire bench``
(``services/bench/run.py``), ``quire bookie format`` and ``quire admin ...``
(``services/cli/admin.py``), ``quire log ...`` (``services/cli/log.py``), ``quire status``
(``services/cli/status.py``), ``quire zk lock|unlock`` (``services/cli/zk.py``). Shell
completion: ``quire --install-completion`` or ``quire --show-completion`` (typer's, for
the shell it runs in; docs/cli.md).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from services.cli.admin import admin_app
from services.cli.bench import bench_command
from services.cli.bookie import bookie_app
from services.cli.common import DEFAULT_GATEWAY, GlobalOptions
from services.cli.ledger import ledger_app
from services.cli.log import log_app
from services.cli.status import status
from services.cli.up import up
from services.cli.zk import zk_app

app = typer.Typer(
    name="quire",
    help="Quire: a replicated, durable log store (the BookKeeper ledger protocol over HTTP).",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command("up")(up)
app.command("status")(status)
app.add_typer(bookie_app, name="bookie")
app.add_typer(ledger_app, name="ledger")
app.add_typer(log_app, name="log")
app.add_typer(admin_app, name="admin")
app.add_typer(zk_app, name="zk")
app.command("bench")(bench_command)


@app.callback()
def _global(
    ctx: typer.Context,
    gateway: Annotated[
        str,
        typer.Option(
            envvar="QUIRE_GATEWAY", help="URL of the gateway the ledger and log commands talk to"
        ),
    ] = DEFAULT_GATEWAY,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="QUIRE_TOKEN", show_default=False, help="API (or admin) token for the gateway"
        ),
    ] = None,
    ca_file: Annotated[
        Path | None,
        typer.Option(
            envvar="QUIRE_CA_FILE",
            show_default=False,
            exists=True,
            dir_okay=False,
            readable=True,
            help="CA bundle (PEM) that an https:// gateway's certificate is verified against",
        ),
    ] = None,
) -> None:
    if not re.match(r"^https?://[^/\s]+", gateway):
        raise typer.BadParameter(f"must be an http:// or https:// URL, got {gateway!r}")
    ctx.obj = GlobalOptions(gateway.rstrip("/"), token or None, ca_file)


def main() -> None:
    app(prog_name="quire")


if __name__ == "__main__":
    main()
