"""``quire log ...``: the Logs API of a gateway (docs/api.md, "Logs").

Thin wrappers like ``quire ledger``: each command is one or a few calls through
``GatewayClient``; objects go to stdout as JSON (indented on a terminal, one line
otherwise), progress and errors to stderr, and an API error prints ``quire: error:
CODE: MESSAGE`` and exits with the code of its class (``EXIT_CODES_HELP``).

Names and positions are checked here with the gateway's own rules
(``services/protocol/logs.py``) before any call. Positions are ``LID:EID`` both in
what the commands take and in what they print.

``tail --follow`` long-polls (``wait_ms``) on the ``next`` of each page until Ctrl-C or
SIGTERM, and then exits 0.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer

from services.cli.client import EXIT_CODES_HELP, GatewayClient, reported
from services.cli.common import fail, global_options
from services.cli.ledger_io import batches, err, print_json, quiet_stdout
from services.cli.limits import APPEND_BATCH_DEFAULT, FOLLOW_WAIT_MS
from services.cli.listing import LOGS, print_listing
from services.cli.log_io import (
    PositionedRecord,
    cursor_argument,
    cursor_option,
    duration_option,
    expect_option,
    key_option,
    name_argument,
    page_json,
    position_option,
    read_records,
    start_time,
    tail_records,
    time_option,
    write_records,
)
from services.cli.progress import ReadProgress, progress_wanted, stdout_is_terminal
from services.cli.stream_io import append_input, open_appender
from services.cli.units import NONE, parse_count, parse_duration_s, parse_size
from services.clock import wall_ms
from services.errors import QuireError
from services.limits import BATCH_ENTRIES_MAX, LAC_WAIT_MAX_MS, LIST_LIMIT_MAX

log_app = typer.Typer(
    help=(
        "Logs: create, writer, append, read, tail, roll, truncate, show, list, delete, "
        "retention; durable cursors (cursor ...).\n\n"
        "A log is a named, ordered list of ledgers with one writer gateway at a time. "
        "Positions are LID:EID. Talks to the gateway of the global --gateway option "
        "(env QUIRE_GATEWAY) with its --token (env QUIRE_TOKEN); both go before 'log'.\n\n"
        + EXIT_CODES_HELP
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

LogName = Annotated[
    str,
    typer.Argument(
        callback=name_argument,
        show_default=False,
        help="the log's name: 1-200 characters of A-Za-z0-9._-",
    ),
]
From = Annotated[
    str | None,
    typer.Option(
        "--from",
        callback=position_option,
        show_default=False,
        help="the position LID:EID to read from [default: the start of the log]",
    ),
]
TailJson = Annotated[
    bool,
    typer.Option("--json", help='one {"position", "data" (base64), "time"} object per line'),
]
Positions = Annotated[
    bool, typer.Option("--positions", "-p", help="start each line with LID:EID and a tab")
]
Quiet = Annotated[
    bool, typer.Option("--quiet", "-q", help="no progress bar (drawn only on a terminal anyway)")
]


MaxAge = Annotated[
    str | None,
    typer.Option(
        "--max-age",
        show_default=False,
        help="retention: remove closed ledgers older than this (90s, 15m, 12h, 7d, 2w; none)",
    ),
]
MaxBytes = Annotated[
    str | None,
    typer.Option(
        "--max-bytes",
        show_default=False,
        help="retention: keep at most this many bytes (4096, 64MiB, 10GiB, 1GB; none)",
    ),
]
MaxRecords = Annotated[
    str | None,
    typer.Option(
        "--max-records", show_default=False, help="retention: keep at most this many records"
    ),
]
MaxBacklog = Annotated[
    str | None,
    typer.Option(
        "--max-backlog",
        show_default=False,
        help="retention: the most bytes cursors hold back past the limits (with "
        "--retain-for-cursors; none)",
    ),
]


def _client(ctx: typer.Context) -> GatewayClient:
    options = global_options(ctx)
    return GatewayClient(options.gateway, options.token, ca_file=options.ca_file)


@log_app.command()
def create(
    ctx: typer.Context,
    name: LogName,
    ensemble: Annotated[
        int | None,
        typer.Option(
            "--ensemble", "-e", min=1, show_default=False, help="ensemble size E [default: 3]"
        ),
    ] = None,
    write_quorum: Annotated[
        int | None,
        typer.Option(
            "--write-quorum", "-w", min=1, show_default=False, help="write quorum Qw [default: 2]"
        ),
    ] = None,
    ack_quorum: Annotated[
        int | None,
        typer.Option(
            "--ack-quorum", "-a", min=1, show_default=False, help="ack quorum Qa [default: 2]"
        ),
    ] = None,
    max_age: MaxAge = None,
    max_bytes: MaxBytes = None,
    max_records: MaxRecords = None,
    retain_for_cursors: Annotated[
        bool,
        typer.Option(
            "--retain-for-cursors",
            help="keep ledgers a durable cursor has not acknowledged (bounded by --max-backlog)",
        ),
    ] = False,
    max_backlog: MaxBacklog = None,
) -> None:
    """Create a log (or show the one that exists); prints the log object.

    The quorums apply to every ledger of the log; the retention options set its
    policy (change it later with 'quire log retention'). Nobody writes it yet: take
    the writer role with 'quire log writer NAME' on the gateway that will append.
    """
    body: dict[str, Any] = {}
    for key, value in (
        ("ensemble_size", ensemble),
        ("write_quorum", write_quorum),
        ("ack_quorum", ack_quorum),
    ):
        if value is not None:
            body[key] = value
    policy = {
        k: v
        for k, v in _policy_fields(max_age, max_bytes, max_records, max_backlog).items()
        if v is not None
    }
    if retain_for_cursors:
        policy["retain_for_cursors"] = True
    if policy:
        body["retention"] = policy
    with reported(), _client(ctx) as client:
        print_json(client.json("PUT", f"/v1/logs/{name}", json=body))


def _policy_fields(
    max_age: str | None, max_bytes: str | None, max_records: str | None, max_backlog: str | None
) -> dict[str, int | None]:
    """The limits given, parsed (``none``: null, which clears it in a patch)."""
    fields: dict[str, int | None] = {}
    for key, text, parse, option in (
        ("max_age_s", max_age, parse_duration_s, "--max-age"),
        ("max_bytes", max_bytes, parse_size, "--max-bytes"),
        ("max_records", max_records, parse_count, "--max-records"),
        ("max_backlog_bytes", max_backlog, parse_size, "--max-backlog"),
    ):
        if text is not None:
            fields[key] = None if text.strip().lower() == NONE else parse(text, option)
    return fields


@log_app.command()
def retention(
    ctx: typer.Context,
    name: LogName,
    max_age: MaxAge = None,
    max_bytes: MaxBytes = None,
    max_records: MaxRecords = None,
    retain_for_cursors: Annotated[
        bool | None,
        typer.Option(
            "--retain-for-cursors/--no-retain-for-cursors",
            show_default=False,
            help="keep ledgers a durable cursor has not acknowledged, or stop keeping them",
        ),
    ] = None,
    max_backlog: MaxBacklog = None,
    clear: Annotated[bool, typer.Option("--clear", help="remove the whole policy")] = False,
) -> None:
    """Show or change a log's retention policy; prints the log object with its usage.

    Without options it only shows. Each limit given changes that limit alone ('none'
    clears it); the others stay. The elected auditor applies the policy in whole closed
    ledgers at its next pass (--retention-interval), never the log's last ledger.
    Needs the admin scope.
    """
    fields: dict[str, Any] = dict(_policy_fields(max_age, max_bytes, max_records, max_backlog))
    if retain_for_cursors is not None:
        fields["retain_for_cursors"] = retain_for_cursors
    if clear and fields:
        fail("--clear removes the whole policy: give it alone", code=2)
    with reported(), _client(ctx) as client:
        if clear or fields:
            client.json("PATCH", f"/v1/logs/{name}", json={"retention": None if clear else fields})
        print_json(client.json("GET", f"/v1/logs/{name}", params={"usage": "true"}))


@log_app.command()
def writer(ctx: typer.Context, name: LogName) -> None:
    """Make this gateway the log's writer; prints {"epoch", "ledger_id"}.

    The previous writer, wherever it runs, is fenced: its next append answers
    not_writer. Appends must then go to this gateway.
    """
    with reported(), _client(ctx) as client:
        print_json(client.json("POST", f"/v1/logs/{name}/writer"))


@log_app.command()
def append(
    ctx: typer.Context,
    name: LogName,
    data: Annotated[
        list[str] | None,
        typer.Argument(
            show_default=False,
            help="records, one per argument (UTF-8); without any, read --file or stdin",
        ),
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file", "-f", show_default=False, help="read records from this file, one per line"
        ),
    ] = None,
    batch: Annotated[
        int, typer.Option(min=1, max=BATCH_ENTRIES_MAX, help="records per request")
    ] = APPEND_BATCH_DEFAULT,
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            "-k",
            callback=key_option,
            show_default=False,
            help="Idempotency-Key of the request (the Nth request after the first sends "
            "KEY#N): a retry with the same key and records appends nothing and prints "
            "the original positions",
        ),
    ] = None,
    quiet: Quiet = False,
    stream: Annotated[
        bool,
        typer.Option(
            "--stream",
            help="send the records over one streaming append (WebSocket), many in flight, "
            "one acknowledgement each; --key then derives one key per record",
        ),
    ] = False,
    expect: Annotated[
        str | None,
        typer.Option(
            "--expect",
            callback=expect_option,
            show_default=False,
            help="append only if the log's last record is at LID:EID ('none': the log has "
            "no record); else exit 15 and nothing is appended (each later request expects "
            "the last position of the one before)",
        ),
    ] = None,
) -> None:
    """Append records to a log (any gateway takes them).

    Each DATA argument is one record; otherwise every line of --file (or stdin)
    is one record, without its newline, sent in batches of --batch records.
    Prints a JSON summary: records, bytes, first and last position. If a
    request fails, what was acknowledged before is reported on stderr; with
    --key the same command can be run again safely. Records from a file or
    stdin show a progress bar on a terminal (stderr), unless --quiet.
    """
    if data and file is not None:
        raise typer.BadParameter("give records as arguments or --file, not both")
    with reported(), _client(ctx) as client:
        appender = open_appender(client, global_options(ctx), name, key, stream, expect)
        try:
            if data:
                for chunk in batches([d.encode() for d in data], batch):
                    appender.send(chunk)
            else:
                append_input(appender, file, batch, quiet)
            appender.finish()
        except QuireError:
            if appender.records:
                err.print(
                    f"quire: {appender.records} records were acknowledged before the error "
                    f"(positions {appender.first_position}..{appender.last_position})",
                    markup=False,
                )
            raise
        finally:
            appender.close()
    print_json(appender.summary())


@log_app.command()
def read(
    ctx: typer.Context,
    name: LogName,
    start: From = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            callback=duration_option,
            show_default=False,
            metavar="DURATION",
            help="start at the first record appended at most this long ago: 30s, 10m, 2h, 7d",
        ),
    ] = None,
    from_time: Annotated[
        str | None,
        typer.Option(
            "--from-time",
            callback=time_option,
            show_default=False,
            metavar="TIME",
            help="start at the first record appended at or after TIME: ms since the Unix "
            "epoch or RFC 3339 (2026-11-29T10:00:00Z)",
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            min=1,
            show_default=False,
            help="at most this many records [default: all that are readable now]",
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help='print one object {"records": [{"position", "data" (base64), "time"}...], '
            '"next", "caught_up"}',
        ),
    ] = False,
    positions: Positions = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            show_default=False,
            help="write to this file instead of stdout (with a progress bar on a terminal)",
        ),
    ] = None,
    quiet: Quiet = False,
    cursor: Annotated[
        str | None,
        typer.Option(
            "--cursor",
            callback=cursor_option,
            show_default=False,
            help="start just after this durable cursor's position (quire log cursor)",
        ),
    ] = None,
    ack: Annotated[
        bool,
        typer.Option(
            "--ack", help="with --cursor: once printed, move the cursor to the last record read"
        ),
    ] = False,
) -> None:
    """Read records in log order, one line of text each (never fences the writer).

    Starts at --from, at the first record appended at or after --from-time,
    --since ago, or just after durable cursor --cursor's position (one of the
    four; default: the log's start); --ack then acknowledges the last record
    printed, after it was written out. Stops after
    --limit records or at the end of what the writer has acknowledged; the
    position to go on from is printed on stderr ('next LID:EID'), or with
    --json as "next" of the object. Into a file (--output, or stdout
    redirected) a progress bar shows on stderr when it is a terminal, unless
    --quiet or --json.
    """
    if sum(given is not None for given in (start, since, from_time, cursor)) > 1:
        raise typer.BadParameter("give one of --from, --since, --from-time and --cursor")
    if ack and cursor is None:
        raise typer.BadParameter("--ack acknowledges to a --cursor")
    last: str | None = None
    from_ms = start_time(since, from_time, wall_ms())
    following: str | None = start
    caught_up = False
    records: list[PositionedRecord] = []
    show = progress_wanted(
        quiet or as_json, output_is_terminal=output is None and stdout_is_terminal()
    )
    try:
        sink = sys.stdout.buffer if output is None else open(output, "wb")  # noqa: SIM115
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror or exc}")
    try:
        with reported(), _client(ctx) as client, ReadProgress(show, limit, "records") as bar:
            for page in read_records(client, name, start, limit, from_ms, cursor):
                if page.records:
                    last = page.records[-1].position
                if as_json:
                    records += page.records
                else:
                    bar.advance_many(
                        len(page.records), write_records(page.records, False, positions, sink)
                    )
                following, caught_up = page.next, page.caught_up
        if as_json:
            doc = page_json(records, following, caught_up)
            if output is None:
                print_json(doc)
            else:
                sink.write(json.dumps(doc).encode() + b"\n")
        elif following is not None:
            end = " (caught up)" if caught_up else ""
            err.print(f"next {following}{end}", markup=False)
        if ack and cursor is not None and last is not None:
            sink.flush()
            with reported(), _client(ctx) as client:
                acked = client.json(
                    "POST", f"/v1/logs/{name}/cursors/{cursor}/ack", json={"position": last}
                )
            state = "acked" if acked.get("moved") else "already past"
            err.print(f"cursor {cursor} {state} {last}", markup=False)
    except BrokenPipeError:
        quiet_stdout()
    finally:
        if output is not None:
            sink.close()


class _Stop(Exception):
    """SIGTERM during ``tail --follow``."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Stop


@log_app.command()
def tail(
    ctx: typer.Context,
    name: LogName,
    start: From = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow", "-f", help="keep waiting for new records until Ctrl-C (or SIGTERM)"
        ),
    ] = False,
    wait_ms: Annotated[
        int,
        typer.Option(
            min=1, max=LAC_WAIT_MAX_MS, help="how long one poll of --follow waits at the gateway"
        ),
    ] = FOLLOW_WAIT_MS,
    as_json: TailJson = False,
    positions: Positions = False,
) -> None:
    """Print records from --from (default: the log's start); --follow waits for more.

    Without --follow it stops at the end of what is readable now. --follow
    long-polls the gateway on the position after the last record printed;
    Ctrl-C or SIGTERM ends it with exit code 0.
    """
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        with reported(), _client(ctx) as client:
            tail_records(client, name, start, follow, wait_ms, as_json, positions)
    except (KeyboardInterrupt, _Stop):
        pass
    except BrokenPipeError:
        quiet_stdout()
    finally:
        signal.signal(signal.SIGTERM, previous)


@log_app.command()
def roll(ctx: typer.Context, name: LogName) -> None:
    """Start a new ledger for the log's next records (as its writer); prints {"ledger_id"}."""
    with reported(), _client(ctx) as client:
        print_json(client.json("POST", f"/v1/logs/{name}/roll"))


@log_app.command()
def truncate(
    ctx: typer.Context,
    name: LogName,
    before: Annotated[
        str,
        typer.Option(
            "--before",
            callback=position_option,
            show_default=False,
            help="LID:EID: remove the whole ledgers that end before it",
        ),
    ],
) -> None:
    """Remove the log's whole ledgers that end before a position; prints the log object."""
    with reported(), _client(ctx) as client:
        print_json(client.json("POST", f"/v1/logs/{name}/truncate", params={"before": before}))


@log_app.command()
def show(
    ctx: typer.Context,
    name: LogName,
    usage: Annotated[
        bool,
        typer.Option("--usage", help="add its ledgers, records and bytes (a look-up per ledger)"),
    ] = False,
) -> None:
    """Print the log object: its ledgers in log order, its writer (gateway, epoch) and
    its retention policy."""
    params = {"usage": "true"} if usage else None
    with reported(), _client(ctx) as client:
        print_json(client.json("GET", f"/v1/logs/{name}", params=params))


@log_app.command("list")
def list_logs(
    ctx: typer.Context,
    limit: Annotated[
        int, typer.Option(min=1, max=LIST_LIMIT_MAX, help="names per page")
    ] = LIST_LIMIT_MAX,
    after: Annotated[
        str | None,
        typer.Option(show_default=False, help="list the names after this one (byte order)"),
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="follow the pages to the end")] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help='print {"logs": [...], "next": NAME|null} (with --long also "details": '
            "[log objects])",
        ),
    ] = False,
    long: Annotated[
        bool,
        typer.Option(
            "--long", "-l", help="a table with each log's ledgers and writer (one call per log)"
        ),
    ] = False,
) -> None:
    """List log names in byte order: one page, or --all of them.

    On a terminal a table, piped one name per line; --long: a table with each
    log's ledger count, last ledgers and writer.
    """
    with reported(), _client(ctx) as client:
        print_listing(client, LOGS, limit, after, every, as_json, long)


@log_app.command()
def delete(
    ctx: typer.Context,
    names: Annotated[list[str], typer.Argument(show_default=False, help="the log name(s)")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
) -> None:
    """Delete logs and every ledger in them. Asks first unless --yes."""
    for log_name in names:
        name_argument(log_name)
    shown = ", ".join(names)
    if not yes:
        if not sys.stdin.isatty():
            fail(f"refusing to delete log {shown} without --yes: stdin is not a terminal")
        if not typer.confirm(f"Delete log {shown} and every record in it?", default=False):
            fail("not confirmed; nothing deleted")
    with reported(), _client(ctx) as client:
        for log_name in names:
            client.request("DELETE", f"/v1/logs/{log_name}")
            print(f"deleted log {log_name}", flush=True)


cursor_app = typer.Typer(
    help=(
        "Durable cursors: a reader's position in a log, kept by the cluster.\n\n"
        "A cursor stores the last record it acknowledged; 'quire log read --cursor C' "
        "reads just after it, and --ack (or 'cursor ack') moves it forward, never back."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
log_app.add_typer(cursor_app, name="cursor")

CursorName = Annotated[
    str,
    typer.Argument(
        callback=cursor_argument,
        show_default=False,
        help="the cursor's name: 1-200 characters of A-Za-z0-9._-",
    ),
]


def _cursor_path(name: str, cursor: str) -> str:
    return f"/v1/logs/{name}/cursors/{cursor}"


@cursor_app.command("create")
def cursor_create(
    ctx: typer.Context,
    name: LogName,
    cursor: CursorName,
    start: Annotated[
        str,
        typer.Option(
            "--start",
            help="earliest (before the first record), latest (at the last record) or LID:EID",
        ),
    ] = "latest",
    from_time: Annotated[
        str | None,
        typer.Option(
            "--from-time",
            callback=time_option,
            show_default=False,
            metavar="TIME",
            help="start at the record before the first appended at or after TIME (ms since "
            "the Unix epoch or RFC 3339); instead of --start",
        ),
    ] = None,
) -> None:
    """Create a durable cursor (or show the one that exists, unchanged); prints the
    cursor object {"name", "position", "lag_records", "lag_bytes", "acked_at"}."""
    if start not in ("earliest", "latest"):
        start = position_option(start) or start
    body: dict[str, Any] = {"start": start}
    if from_time is not None:
        body["start"] = {"time": from_time.strip()}
    with reported(), _client(ctx) as client:
        print_json(client.json("PUT", _cursor_path(name, cursor), json=body))


@cursor_app.command("show")
def cursor_show(ctx: typer.Context, name: LogName, cursor: CursorName) -> None:
    """Print the cursor object: its position and its lag to the end of the log."""
    with reported(), _client(ctx) as client:
        print_json(client.json("GET", _cursor_path(name, cursor)))


@cursor_app.command("list")
def cursor_list(ctx: typer.Context, name: LogName) -> None:
    """Print {"cursors": [cursor objects...]}: the log's cursors by name, with lag."""
    with reported(), _client(ctx) as client:
        print_json(client.json("GET", f"/v1/logs/{name}/cursors"))


@cursor_app.command("ack")
def cursor_ack(
    ctx: typer.Context,
    name: LogName,
    cursor: CursorName,
    position: Annotated[
        str,
        typer.Argument(
            callback=position_option, show_default=False, help="LID:EID of the last record done"
        ),
    ],
) -> None:
    """Move the cursor forward to POSITION; prints the cursor object with "moved"
    (false: the cursor was there or past it already, and did not move)."""
    with reported(), _client(ctx) as client:
        print_json(
            client.json("POST", f"{_cursor_path(name, cursor)}/ack", json={"position": position})
        )


@cursor_app.command("delete")
def cursor_delete(ctx: typer.Context, name: LogName, cursor: CursorName) -> None:
    """Delete a durable cursor (the log's records are untouched)."""
    with reported(), _client(ctx) as client:
        client.request("DELETE", _cursor_path(name, cursor))
    print(f"deleted cursor {cursor} of log {name}", flush=True)
