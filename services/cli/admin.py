"""``quire admin ...``: the Admin API of a gateway (docs/api.md "Admin"), for operators.

``cluster``, ``bookies``, ``under-replicated`` and ``placement`` print rich tables
(``--json`` for the API's object instead); ``audit``, ``replication enable|disable`` and
``decommission`` change something and say what; ``storage`` prints each running
bookie's storage report (``--by-log``: and its bytes by log) and ``gc`` runs a
garbage-collection pass on one (docs/operations.md "Space given back");
``decommission --wait`` and ``wait-replicated`` show a progress bar (ledgers left, MB
copied, rate) until the cluster is whole again, with ``--timeout``. Talks to the gateway
of the global ``--gateway`` option with its ``--token`` — the admin token when the
gateway runs with ``--admin-token``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from services.cli.admin_wait import Poll, View, copied_bytes, wait_until
from services.cli.client import EXIT_CODES_HELP, GatewayClient, pages, reported
from services.cli.common import global_options, human_bytes
from services.cli.ledger_io import err, print_json
from services.cli.limits import (
    STORAGE_BY_LOG_CALL_TIMEOUT_S,
    STORAGE_CALL_TIMEOUT_S,
    WAIT_POLL_INTERVAL_S,
    WAIT_PROGRESS_PAGES_MAX,
)
from services.cli.listing import dash, table_console, when_ms
from services.errors import GatewayUnreachable, Unavailable
from services.limits import LIST_LIMIT_MAX

# Exit code of a wait that ran out of time (distinct from every error's, client.py).
EXIT_WAIT_TIMEOUT = 11
# A drain that left logs on the gateway (each named on stderr).
EXIT_DRAIN_INCOMPLETE = 16
# Ctrl-C: the shell's convention for SIGINT.
EXIT_INTERRUPTED = 130

admin_app = typer.Typer(
    help=(
        "Cluster administration: cluster, bookies, gateways, drain, under-replicated, placement, "
        "audit, "
        "replication enable|disable, decommission, wait-replicated, storage, gc.\n\n"
        "Talks to the gateway of the global --gateway option (env QUIRE_GATEWAY) with its "
        "--token (env QUIRE_TOKEN; the admin token when the gateway has one); both go "
        "before 'admin'.\n\n"
        + EXIT_CODES_HELP
        + f" A wait that times out exits {EXIT_WAIT_TIMEOUT}; Ctrl-C exits {EXIT_INTERRUPTED}."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
replication_app = typer.Typer(
    help="Switch re-replication on or off cluster-wide (marks stay while it is off).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
admin_app.add_typer(replication_app, name="replication")

AsJson = Annotated[bool, typer.Option("--json", help="print the API's JSON object")]
Timeout = Annotated[
    float | None,
    typer.Option(
        min=0.0,
        show_default=False,
        help=f"give up after this many seconds (exit {EXIT_WAIT_TIMEOUT}; default: wait for ever)",
    ),
]
Interval = Annotated[float, typer.Option(min=0.1, help="seconds between two polls of the gateway")]
Quiet = Annotated[
    bool,
    typer.Option("--quiet", "-q", help="no progress on stderr (warnings and errors still show)"),
]


def _client(ctx: typer.Context) -> GatewayClient:
    options = global_options(ctx)
    return GatewayClient(options.gateway, options.token, ca_file=options.ca_file)


_STATE_STYLE = {
    "writable": "green",
    "readonly": "yellow",
    "down": "bold red",
    "decommissioning": "magenta",
    "decommissioned": "dim",
}


# -- cluster ----------------------------------------------------------------


def cluster_table(doc: dict[str, Any]) -> Table:
    table = Table(title="Quire cluster", show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value")
    auditor = doc.get("auditor_id") if doc.get("auditor_elected") else None
    table.add_row("auditor", auditor or "[red]none elected[/red]")
    enabled = doc.get("replication_enabled")
    table.add_row("replication", "[green]enabled[/green]" if enabled else "[red]disabled[/red]")
    table.add_row("under-replicated ledgers", str(doc.get("under_replicated_ledgers")))
    counts = doc.get("bookies") or {}
    for key in ("writable", "readonly", "unavailable"):
        table.add_row(f"bookies {key}", dash(counts.get(key)))
    racks = doc.get("racks") or {}
    table.add_row("racks", ", ".join(f"{r} ({n})" for r, n in racks.items()) or "-")
    table.add_row("placement violations", dash(doc.get("placement_violations")))
    return table


@admin_app.command()
def cluster(ctx: typer.Context, as_json: AsJson = False) -> None:
    """The auditor, the replication switch, the under-replicated count and bookie counts."""
    with reported(), _client(ctx) as client:
        doc = client.json("GET", "/v1/admin/cluster")
    if as_json:
        print_json(doc)
    else:
        table_console().print(cluster_table(doc))


# -- bookies ----------------------------------------------------------------


def bookies_table(bookies: list[dict[str, Any]]) -> Table:
    table = Table(title="Bookies", title_justify="left")
    table.add_column("id", overflow="fold")
    table.add_column("state", no_wrap=True)
    table.add_column("rack", overflow="fold")
    table.add_column("ledgers", justify="right")
    table.add_column("free", justify="right")
    table.add_column("total", justify="right")
    table.add_column("free %", justify="right")
    for b in bookies:
        state = str(b.get("state"))
        ratio = b.get("free_ratio")
        table.add_row(
            str(b.get("id")),
            f"[{_STATE_STYLE.get(state, '')}]{state}[/]" if state in _STATE_STYLE else state,
            dash(b.get("rack")),
            dash(b.get("ledgers")),
            human_bytes(b.get("free_bytes")),
            human_bytes(b.get("total_bytes")),
            "-" if ratio is None else f"{ratio * 100:.1f}",
        )
    return table


@admin_app.command()
def bookies(ctx: typer.Context, as_json: AsJson = False) -> None:
    """Every known bookie with its state, rack, ledger count and free disk.

    States: writable, readonly, down, decommissioning, decommissioned.
    """
    with reported(), _client(ctx) as client:
        doc = client.json("GET", "/v1/admin/bookies")
    if as_json:
        print_json(doc)
    elif not doc["bookies"]:
        err.print("no bookies known", markup=False)
    else:
        table_console().print(bookies_table(doc["bookies"]))


# -- storage and garbage collection ------------------------------------------


def storage_table(doc: dict[str, Any]) -> Table:
    """One bookie's storage report: its file, then a row per listed ledger with its
    reason (docs/operations.md "Space given back")."""
    used = doc["file_bytes"] - doc["free_pages_bytes"]
    live = doc["live"]
    last = doc.get("last_pass")
    caption = (
        "no pass yet"
        if not last
        else f"last pass {last['at']}: freed {last['freed_ledgers']} ledgers, "
        f"{human_bytes(last['freed_bytes'])} in {last['took_ms']} ms"
        + (f" (stopped: {last['error']})" if last.get("error") else "")
    )
    table = Table(
        title=f"Storage of {doc['bookie']}: file {human_bytes(doc['file_bytes'])}, used "
        f"{human_bytes(used)}, free pages {human_bytes(doc['free_pages_bytes'])}",
        caption=caption,
        title_justify="left",
        caption_justify="left",
    )
    table.add_column("what", no_wrap=True)
    table.add_column("ledger", justify="right")
    table.add_column("bytes", justify="right")
    table.add_column("reason", overflow="fold")
    table.add_row(
        "[green]live[/green]", f"{live['ledgers']} ledgers", human_bytes(live["bytes"]), "-"
    )
    purging = doc.get("purging")  # absent from bookies of older versions
    if purging and purging["ledgers"]:
        table.add_row(
            "purging",
            f"{purging['ledgers']} ledgers",
            human_bytes(purging["bytes"]),
            "deleted; entries being removed in the background",
        )
    for key, label in (("orphaned", "orphaned"), ("pending_delete", "pending delete")):
        for item in doc[key]:
            table.add_row(
                f"[yellow]{label}[/yellow]",
                str(item["ledger_id"]),
                human_bytes(item["bytes"]),
                item["reason"],
            )
        unlisted = doc[f"{key}_count"] - len(doc[key])
        if unlisted > 0:
            table.add_row(f"[yellow]{label}[/yellow]", f"{unlisted} more", "", "not listed")
    return table


def by_log_table(doc: dict[str, Any]) -> Table:
    """One bookie's bytes by log: a row per listed log (largest first), then the plain
    ledgers and those whose metadata is gone (docs/operations.md "Space given back")."""
    by_log = doc["by_log"]
    looked = f"{by_log['ledgers_looked_at']} ledgers looked at"
    if by_log["truncated"]:
        looked += " (stopped at the bound: the totals cover these, the lowest ids)"
    table = Table(
        title=f"Storage of {doc['bookie']} by log: {by_log['logs_count']} logs",
        caption=looked,
        title_justify="left",
        caption_justify="left",
    )
    table.add_column("log", overflow="fold")
    table.add_column("ledgers", justify="right")
    table.add_column("bytes", justify="right")
    for row in by_log["logs"]:
        # A log's name comes from ledger metadata: printed as text, never as markup.
        table.add_row(Text(row["log"]), str(row["ledgers"]), human_bytes(row["bytes"]))
    unlisted = by_log["logs_count"] - len(by_log["logs"])
    if unlisted > 0:
        table.add_row(f"({unlisted} more logs, smaller)", "", "")
    rows = [
        ("[dim]not in a log[/dim]", "not_in_a_log"),
        ("[yellow]metadata missing[/yellow]", "metadata_missing"),
        ("[red]metadata unreadable[/red]", "metadata_unreadable"),
    ]
    for label, key in rows:
        bucket = by_log[key]
        if bucket["ledgers"] or key != "metadata_unreadable":
            table.add_row(label, str(bucket["ledgers"]), human_bytes(bucket["bytes"]))
    return table


@admin_app.command()
def storage(
    ctx: typer.Context,
    bookie_id: Annotated[
        str | None,
        typer.Argument(show_default=False, help="the bookie's id (host:port); default: all"),
    ] = None,
    by_log: Annotated[
        bool,
        typer.Option(
            "--by-log",
            help="also count the bytes by log (reads every stored ledger's metadata: "
            "costly, bounded)",
        ),
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Where bookies' space goes: the file and its free pages, live ledgers, and the
    ledgers garbage collection found orphaned or will delete, each with its reason;
    with --by-log, which logs the bytes belong to. Without BOOKIE, every running bookie
    (a table each; --json: a list)."""
    with reported(), _client(ctx) as client:
        if bookie_id is None:
            listed = client.json("GET", "/v1/admin/bookies")["bookies"]
            ids = [b["id"] for b in listed if b.get("state") not in ("down", "decommissioned")]
        else:
            ids = [bookie_id]
        docs = [
            client.json(
                "GET",
                f"/v1/admin/bookies/{quote(bid, safe=':')}/storage",
                params={"by_log": "true"} if by_log else None,
                timeout=STORAGE_BY_LOG_CALL_TIMEOUT_S if by_log else STORAGE_CALL_TIMEOUT_S,
            )
            for bid in ids
        ]
    if as_json:
        print_json(docs[0] if bookie_id is not None else docs)
    elif not docs:
        err.print("no bookie is running", markup=False)
    else:
        console = table_console()
        for doc in docs:
            console.print(storage_table(doc))
            if by_log:
                console.print(by_log_table(doc))


@admin_app.command()
def gc(
    ctx: typer.Context,
    bookie_id: Annotated[str, typer.Argument(help="the bookie's id (host:port)")],
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="only say what a pass would free; delete nothing"),
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Run a garbage-collection pass on a bookie now: it deletes the local data of
    ledgers whose metadata two looks, the grace apart, found gone."""
    with reported(), _client(ctx) as client:
        doc = client.json(
            "POST",
            f"/v1/admin/bookies/{quote(bookie_id, safe=':')}/gc",
            params={"dry_run": "true" if dry_run else "false"},
            timeout=STORAGE_CALL_TIMEOUT_S,
        )
    if as_json:
        print_json(doc)
        return
    verb = "would free" if doc["dry_run"] else "freed"
    print(
        f"{bookie_id}: {verb} {doc['freed_ledgers']} ledgers, {human_bytes(doc['freed_bytes'])}; "
        f"{doc['waiting_ledgers']} waiting for the grace, {doc['pending_ledgers']} pending "
        f"({doc['took_ms']} ms)",
        flush=True,
    )
    if doc.get("error"):
        err.print(doc["error"], markup=False)


# -- under-replicated -------------------------------------------------------


def _progress_text(progress: dict[str, Any] | None) -> str:
    if not progress:
        return "-"
    parts = []
    if "fragments_total" in progress:
        parts.append(f"{progress.get('fragments_done', 0)}/{progress['fragments_total']} fragments")
    if "entries_copied" in progress:
        parts.append(f"{progress['entries_copied']} entries")
    if "bytes_copied" in progress:
        parts.append(human_bytes(progress["bytes_copied"]))
    return ", ".join(parts) or "started"


def under_replicated_table(ledgers: list[dict[str, Any]]) -> Table:
    table = Table(title="Under-replicated ledgers", title_justify="left")
    table.add_column("ledger", justify="right", no_wrap=True)
    # Ids are never cut short: a narrow terminal folds them onto more lines.
    table.add_column("missing bookies", overflow="fold")
    table.add_column("move", no_wrap=True)
    table.add_column("marked at (UTC)", no_wrap=True)
    table.add_column("worker", overflow="fold")
    table.add_column("progress")
    for row in ledgers:
        table.add_row(
            str(row["ledger_id"]),
            ", ".join(row.get("missing_bookies") or []),
            "move" if row.get("misplaced") else "-",
            when_ms(row.get("marked_at")),
            dash(row.get("worker")),
            _progress_text(row.get("progress")),
        )
    return table


@admin_app.command("under-replicated")
def under_replicated(
    ctx: typer.Context,
    limit: Annotated[
        int, typer.Option(min=1, max=LIST_LIMIT_MAX, help="ledgers per page")
    ] = LIST_LIMIT_MAX,
    after: Annotated[
        int | None,
        typer.Option(min=-1, show_default=False, help="list the ledgers after this id"),
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="follow the pages to the end")] = False,
    as_json: AsJson = False,
) -> None:
    """Under-replicated ledgers in id order, with the repair progress of each.

    Shows the missing bookies of each ledger, whether a placement move to another rack
    is asked for (move), and the worker repairing it.
    """
    rows: list[dict[str, Any]] = []
    next_after = after
    with reported(), _client(ctx) as client:
        for page in pages(client, "/v1/admin/under-replicated", limit, after, every):
            rows += page["ledgers"]
            next_after = page.get("next")
    if as_json:
        print_json({"ledgers": rows, "next": next_after})
        return
    if rows:
        table_console().print(under_replicated_table(rows))
    else:
        err.print("no under-replicated ledgers", markup=False)
    if next_after is not None:
        err.print(f"more after {next_after}: --after {next_after}, or --all", markup=False)


# -- placement ----------------------------------------------------------------


def placement_table(doc: dict[str, Any]) -> Table:
    racks = ", ".join(f"{r} ({n})" for r, n in (doc.get("racks") or {}).items()) or "-"
    checked = when_ms(doc.get("checked_at"))
    title = (
        f"Placement: {doc.get('violations', 0)} ledger(s) on too few racks, "
        f"{doc.get('movable', 0)} movable now; racks {racks}; checked {checked}"
    )
    table = Table(title=title, title_justify="left")
    table.add_column("ledger", justify="right", no_wrap=True)
    table.add_column("fragments (first entry)", overflow="fold")
    table.add_column("movable", no_wrap=True)
    for row in doc.get("ledgers") or []:
        table.add_row(
            str(row["ledger_id"]),
            ", ".join(str(f) for f in row.get("fragments") or []),
            "yes" if row.get("movable") else "no: no bookie on a rack it lacks",
        )
    return table


@admin_app.command()
def placement(ctx: typer.Context, as_json: AsJson = False) -> None:
    """Ledgers whose write quorums span too few racks, as the auditor's last check found
    them, and whether a move to another rack can fix each now (the workers then move
    it; docs/operations.md "Racks")."""
    with reported(), _client(ctx) as client:
        doc = client.json("GET", "/v1/admin/placement")
    if as_json:
        print_json(doc)
        return
    table_console().print(placement_table(doc))
    if doc.get("truncated"):
        err.print("more ledgers than listed (the report lists the first 100)", markup=False)


# -- gateways ---------------------------------------------------------------


def gateways_table(gateways: list[dict[str, Any]]) -> Table:
    table = Table(title="Gateways", title_justify="left")
    table.add_column("id", overflow="fold")
    table.add_column("scheme", no_wrap=True)
    table.add_column("state", no_wrap=True)
    for g in gateways:
        state = "[yellow]draining[/yellow]" if g.get("draining") else "[green]serving[/green]"
        table.add_row(str(g.get("address")), str(g.get("scheme")), state)
    return table


@admin_app.command()
def gateways(ctx: typer.Context, as_json: AsJson = False) -> None:
    """The live gateways (registered in ZooKeeper), and which are draining."""
    with reported(), _client(ctx) as client:
        doc = client.json("GET", "/v1/admin/gateways")
    if as_json:
        print_json(doc)
    elif not doc["gateways"]:
        err.print("no gateway registered", markup=False)
    else:
        table_console().print(gateways_table(doc["gateways"]))


@admin_app.command()
def drain(
    ctx: typer.Context,
    gateway_id: Annotated[str, typer.Argument(help="the gateway's id (host:port)")],
    as_json: AsJson = False,
) -> None:
    """Drain a gateway: it takes no log any more and hands the logs it writes to the
    other gateways; its /health answers 503 from then on (restart it to serve again)."""
    with reported(), _client(ctx) as client:
        doc = client.json("POST", f"/v1/admin/gateways/{quote(gateway_id, safe=':')}/drain")
    if as_json:
        print_json(doc)
        return
    print(
        f"gateway {doc['gateway']} is draining; {doc['handed_over']} logs handed over", flush=True
    )
    for failed in doc["failed"]:
        err.print(
            f"log {failed['log']} is still written there ({failed['gateway']} did not take it: "
            f"{failed['error']}); drain again to retry",
            markup=False,
        )
    if doc["failed"]:
        raise typer.Exit(EXIT_DRAIN_INCOMPLETE)


# -- audit, replication switch ------------------------------------------------


@admin_app.command()
def audit(ctx: typer.Context, as_json: AsJson = False) -> None:
    """Ask the elected auditor for a full check now."""
    with reported(), _client(ctx) as client:
        doc = client.json("POST", "/v1/admin/audit")
    if as_json:
        print_json(doc)
    elif doc.get("auditor_id"):
        print(f"audit requested: auditor {doc['auditor_id']} runs a full check now", flush=True)
    else:
        print("audit requested; no auditor is elected now: it runs when one is", flush=True)


def _switch(ctx: typer.Context, enabled: bool, as_json: bool) -> None:
    action = "enable" if enabled else "disable"
    with reported(), _client(ctx) as client:
        doc = client.json("POST", f"/v1/admin/replication/{action}")
    if as_json:
        print_json(doc)
    else:
        print(f"replication {action}d; {doc['under_replicated_ledgers']} ledgers under-replicated")


@replication_app.command("enable")
def replication_enable(ctx: typer.Context, as_json: AsJson = False) -> None:
    """Enable re-replication: the workers repair the marked ledgers again."""
    _switch(ctx, True, as_json)


@replication_app.command("disable")
def replication_disable(ctx: typer.Context, as_json: AsJson = False) -> None:
    """Disable re-replication: workers start nothing new; marks stay until enabled."""
    _switch(ctx, False, as_json)


# -- waits --------------------------------------------------------------------


def poll_gateway(client: GatewayClient, bookie_id: str | None = None) -> Poll:
    """One look at the cluster: the under-replicated count, the bytes the workers report
    (first pages of the listing) and, for a decommission, whether it is finished."""
    doc = client.json("GET", "/v1/admin/cluster")
    copied: dict[int, int] = {}
    params: dict[str, int] = {"limit": LIST_LIMIT_MAX}
    for _ in range(WAIT_PROGRESS_PAGES_MAX):
        page = client.json("GET", "/v1/admin/under-replicated", params=params)
        copied.update(copied_bytes(page["ledgers"]))
        if page.get("next") is None:
            break
        params["after"] = page["next"]
    left = int(doc["under_replicated_ledgers"])
    if bookie_id is None:
        done = left == 0
    else:
        state = client.json("GET", f"/v1/admin/bookies/{bookie_id}")["state"]
        done = state == "decommissioned"
    return Poll(left, copied, done, bool(doc.get("replication_enabled", True)))


@contextmanager
def _display(what: str, quiet: bool = False) -> Iterator[Callable[[View, Poll], None]]:
    """A rich progress bar on a terminal; one plain line per change otherwise (a wait may
    run for hours: a log shows it is alive); nothing but warnings with ``quiet``."""
    warned: list[bool] = []

    def warn_disabled(seen: Poll) -> None:
        if not seen.replication_enabled and not warned:
            warned.append(True)
            err.print(
                "replication is disabled: nothing is repaired until "
                "'quire admin replication enable'",
                markup=False,
            )

    if quiet:
        yield lambda view, seen: warn_disabled(seen)
        return
    if err.is_terminal:
        columns = (
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=err, transient=False) as bar:
            task = bar.add_task(what, total=None, detail="")

            def show_bar(view: View, seen: Poll) -> None:
                warn_disabled(seen)
                bar.update(
                    task,
                    total=max(view.total, 1),
                    completed=view.repaired if not seen.done else max(view.total, 1),
                    detail=f"{view.left} left, {view.mb_copied:.1f} MB, "
                    f"{view.mb_per_s:.1f} MB/s, {view.ledgers_per_min:.0f} ledgers/min",
                )

            yield show_bar
        return
    last: list[tuple[int, int, bool]] = []

    def show_line(view: View, seen: Poll) -> None:
        warn_disabled(seen)
        key = (view.left, int(view.mb_copied * 10), seen.done)
        if last and last[-1] == key:
            return
        last[:] = [key]
        err.print(f"{what}: {view.line()}", markup=False)

    yield show_line


def _wait(
    what: str,
    bookie_id: str | None,
    timeout: float | None,
    interval: float,
    client: GatewayClient,
    quiet: bool = False,
    as_json: bool = False,
) -> None:
    """Poll until done (exit 0; ``what: done`` on stdout unless ``as_json``, whose stdout
    is the one JSON object), the timeout (exit 11) or Ctrl-C (130)."""
    last = [Poll(0, {}, False)]

    def poll() -> Poll:
        try:
            last[0] = poll_gateway(client, bookie_id)
        except (GatewayUnreachable, Unavailable) as exc:
            # A gateway restart or a ZooKeeper blip must not end a long wait: show the
            # last figures again and poll once more.
            err.print(f"{what}: {exc.code}: {exc.message}; retrying", markup=False)
            return Poll(last[0].left, {}, False, last[0].replication_enabled)
        return last[0]

    try:
        with _display(what, quiet) as show:
            finished = wait_until(poll, show, timeout_s=timeout, interval_s=interval)
    except KeyboardInterrupt:
        err.print(f"{what}: interrupted", markup=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if not finished:
        err.print(f"quire: error: timeout: {what}: not done after {timeout:g} s", markup=False)
        raise typer.Exit(EXIT_WAIT_TIMEOUT)
    if not as_json:
        print(f"{what}: done", flush=True)


@admin_app.command("wait-replicated")
def wait_replicated(
    ctx: typer.Context,
    timeout: Timeout = None,
    interval: Interval = WAIT_POLL_INTERVAL_S,
    quiet: Quiet = False,
) -> None:
    """Wait until no ledger is under-replicated, with a progress bar.

    The bar shows the ledgers left, the MB copied and the rate (on a terminal;
    otherwise a line on stderr per change; --quiet: neither).
    """
    with reported(), _client(ctx) as client:
        _wait("re-replication", None, timeout, interval, client, quiet)


@admin_app.command()
def decommission(
    ctx: typer.Context,
    bookie: Annotated[str, typer.Argument(show_default=False, help="the bookie's id (host:port)")],
    wait: Annotated[
        bool, typer.Option("--wait", help="wait until it is decommissioned, with progress")
    ] = False,
    timeout: Timeout = None,
    interval: Interval = WAIT_POLL_INTERVAL_S,
    as_json: AsJson = False,
    quiet: Quiet = False,
) -> None:
    """Decommission a bookie, up or down; --wait until it is done.

    No new ensemble chooses it from now on, and everything on it is re-replicated;
    then its state is decommissioned. --json or --quiet: no progress on stderr.
    """
    with reported(), _client(ctx) as client:
        doc = client.json("POST", f"/v1/admin/bookies/{bookie}/decommission")
        if as_json:
            print_json(doc)
        else:
            print(f"bookie {doc['id']}: {doc['state']}", flush=True)
        if wait and doc["state"] != "decommissioned":
            what = f"decommission of {bookie}"
            _wait(what, bookie, timeout, interval, client, quiet or as_json, as_json)
