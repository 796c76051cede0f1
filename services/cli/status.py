"""``quire status``: the whole cluster on one screen, for people and for scripts.

What it asks the gateway of the global ``--gateway`` option (with ``--token``, which
must be the admin token when the gateway has one):

1. ``GET /health``: is the gateway ready (connected to ZooKeeper)? When it is not,
   nothing else is asked: every other answer would be 503.
2. ``GET /v1/admin/cluster``: the elected auditor, the replication switch and the
   under-replicated count.
3. ``GET /v1/admin/bookies``: every bookie with its state, ledgers and free disk.
4. ``GET /v1/admin/under-replicated?limit=N``: the first ``--first`` of them, with the
   repair progress of each.
5. ``GET /v1/logs``: how many logs (at most ``STATUS_LOG_PAGES_MAX`` pages are counted; past
   that ``complete`` is false) and the first names.

The verdict and the exit code are ``services/cli/status_check.py``'s: 0 ok, 12 warning,
13 critical. A call that fails with an API error (e.g. ``metadata_unavailable``) is
reported in the document and is critical; an unreachable gateway (3) or a refused
token (5) ends the command as for every other one, since nothing can be judged then.

``--json`` prints one object, its keys always present (``null`` for a part not
fetched): ``status``, ``exit_code``, ``problems`` [{``severity``, ``check``,
``message``}], ``gateway`` {``url``, ``ready``}, ``auditor`` {``elected``, ``id``},
``replication_enabled``, ``bookies`` {``counts`` {state: n}, ``list`` [the API's bookie
objects]}, ``under_replicated`` {``count``, ``first`` [the API's rows]}, ``logs``
{``count``, ``complete``, ``first`` [names]}, ``errors`` [{``call``, ``code``,
``message``}].
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text

from services.cli import limits
from services.cli.admin import bookies_table, under_replicated_table
from services.cli.client import GatewayClient, reported
from services.cli.common import global_options
from services.cli.ledger_io import print_json
from services.cli.listing import table_console
from services.cli.status_check import (
    EXIT_BY_SEVERITY,
    bookie_counts,
    overall,
    problems,
)
from services.errors import GatewayUnreachable, QuireError, Unauthorized
from services.limits import LIST_LIMIT_MAX

_SEVERITY_STYLE = {"ok": "bold green", "warning": "bold yellow", "critical": "bold red"}


def _call(
    client: GatewayClient, errors: list[dict[str, str]], path: str, **params: Any
) -> dict[str, Any] | None:
    """One GET; an API error is noted in ``errors`` (and the part left out), except the
    two that make the whole status meaningless, which end the command."""
    try:
        doc: dict[str, Any] = client.json("GET", path, params=params)
    except (GatewayUnreachable, Unauthorized):
        raise
    except QuireError as exc:
        errors.append({"call": f"GET {path}", "code": exc.code, "message": exc.message})
        return None
    return doc


def _ready(client: GatewayClient) -> bool:
    try:
        client.request("GET", "/health")
    except GatewayUnreachable:
        raise
    except QuireError:
        return False
    return True


def _logs(client: GatewayClient, errors: list[dict[str, str]], first: int) -> dict[str, Any] | None:
    names: list[str] = []
    count = 0
    after: str | None = None
    for _ in range(limits.STATUS_LOG_PAGES_MAX):
        params: dict[str, Any] = {"limit": LIST_LIMIT_MAX}
        if after is not None:
            params["after"] = after
        page = _call(client, errors, "/v1/logs", **params)
        if page is None:
            return None
        count += len(page["logs"])
        names += page["logs"][: max(0, first - len(names))]
        after = page.get("next")
        if after is None:
            return {"count": count, "complete": True, "first": names}
    return {"count": count, "complete": False, "first": names}


def collect(client: GatewayClient, first: int = limits.STATUS_FIRST_DEFAULT) -> dict[str, Any]:
    """The status document (keys as the module docstring lists them)."""
    errors: list[dict[str, str]] = []
    doc: dict[str, Any] = {
        "status": "ok",
        "exit_code": 0,
        "problems": [],
        "gateway": {"url": client.url, "ready": _ready(client)},
        "auditor": None,
        "replication_enabled": None,
        "bookies": None,
        "under_replicated": None,
        "logs": None,
        "errors": errors,
    }
    if doc["gateway"]["ready"]:
        cluster = _call(client, errors, "/v1/admin/cluster")
        if cluster is not None:
            doc["auditor"] = {
                "elected": bool(cluster.get("auditor_elected")),
                "id": cluster.get("auditor_id"),
            }
            doc["replication_enabled"] = bool(cluster.get("replication_enabled"))
        listing = _call(client, errors, "/v1/admin/bookies")
        if listing is not None:
            rows = listing["bookies"]
            doc["bookies"] = {"counts": bookie_counts(rows), "list": rows}
        marks = _call(client, errors, "/v1/admin/under-replicated", limit=first)
        if marks is not None:
            count = cluster["under_replicated_ledgers"] if cluster else len(marks["ledgers"])
            doc["under_replicated"] = {"count": int(count), "first": marks["ledgers"][:first]}
        doc["logs"] = _logs(client, errors, first)
    found = problems(doc)
    doc["status"] = overall(found)
    doc["exit_code"] = EXIT_BY_SEVERITY[doc["status"]]
    doc["problems"] = [p.as_json() for p in found]
    return doc


# -- the screen ---------------------------------------------------------------------


def _services_table(doc: dict[str, Any]) -> Table:
    table = Table(title="Services", show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value")
    gateway = doc["gateway"]
    ready = "[green]ready[/green]" if gateway["ready"] else "[bold red]not ready[/bold red]"
    table.add_row("gateway", f"{gateway['url']} {ready}")
    auditor = doc["auditor"]
    if auditor is None:
        table.add_row("auditor", "-")
    elif auditor["elected"]:
        table.add_row("auditor", f"{auditor['id']} [green]elected[/green]")
    else:
        table.add_row("auditor", "[bold red]none elected[/bold red]")
    enabled = doc["replication_enabled"]
    switch = {None: "-", True: "[green]enabled[/green]", False: "[yellow]disabled[/yellow]"}
    table.add_row("replication", switch[enabled])
    return table


def render(doc: dict[str, Any]) -> Group:
    """The one screen of ``quire status``."""
    status = doc["status"]
    parts: list[Any] = [
        Text.assemble(
            ("Quire ", "bold"),
            (status.upper(), _SEVERITY_STYLE[status]),
            f"  (exit {doc['exit_code']})",
        ),
        _services_table(doc),
    ]
    bookies = doc["bookies"]
    if bookies is not None:
        parts.append(bookies_table(bookies["list"]) if bookies["list"] else Text("no bookies"))
    under = doc["under_replicated"]
    if under is not None:
        if under["count"] == 0:
            parts.append(Text("Under-replicated ledgers: none"))
        else:
            table = under_replicated_table(under["first"])
            table.title = f"Under-replicated ledgers: {under['count']}"
            parts.append(table)
            if under["count"] > len(under["first"]):
                parts.append(Text("  all of them: quire admin under-replicated --all"))
    logs = doc["logs"]
    if logs is not None:
        count = f"{logs['count']}{'' if logs['complete'] else '+'}"
        names = ", ".join(logs["first"]) + (", …" if logs["count"] > len(logs["first"]) else "")
        parts.append(Text(f"Logs: {count}" + (f" ({names})" if names else "")))
    for problem in doc["problems"]:
        style = _SEVERITY_STYLE[problem["severity"]]
        parts.append(Text.assemble((f"{problem['severity']}: ", style), problem["message"]))
    return Group(*parts)


def status(
    ctx: typer.Context,
    as_json: Annotated[
        bool, typer.Option("--json", help="print one JSON object (keys: docs/cli.md)")
    ] = False,
    first: Annotated[
        int,
        typer.Option(
            min=1, max=limits.STATUS_FIRST_MAX, help="under-replicated ledgers and log names shown"
        ),
    ] = limits.STATUS_FIRST_DEFAULT,
) -> None:
    """The cluster on one screen: gateway, auditor, bookies, under-replication, logs.

    Exit code: 0 all well; 12 warning (under-replicated ledgers, replication
    disabled, a bookie read-only or decommissioning); 13 critical (the gateway not
    ready, a bookie down, no writable bookie, no auditor elected, an admin call
    failed). Errors as for every command: 3 gateway unreachable, 5 wrong token
    (the admin token is needed when the gateway has one).
    """
    options = global_options(ctx)
    client = GatewayClient(options.gateway, options.token, ca_file=options.ca_file)
    with reported(), client:
        doc = collect(client, first)
    if as_json:
        print_json(doc)
    else:
        table_console().print(render(doc))
    if doc["exit_code"]:
        raise typer.Exit(doc["exit_code"])
