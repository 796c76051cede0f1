"""``quire ledger ...``: the Ledgers API of a gateway, for people and scripts.

Thin wrappers: each command is one or a few calls of docs/api.md's Ledgers
section through ``services.cli_client.GatewayClient``. Results go to stdout
(JSON for objects: indented and coloured on a terminal, one compact line
otherwise, so ``| jq`` works either way); progress and errors go to stderr.
An API error prints ``quire: error: CODE: MESSAGE`` and exits with the code
of its class (see ``EXIT_CODES_HELP``).

The ledger password comes from ``--password`` or ``QUIRE_LEDGER_PASSWORD``
and is only ever sent as the ``X-Ledger-Password`` header: never printed,
never logged, never part of an error message.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from services.cli.client import EXIT_CODES_HELP, GatewayClient, reported
from services.cli.common import fail, global_options
from services.cli.ledger_io import (
    Appender,
    ReadFormat,
    batches,
    entries_in_range,
    err,
    input_lines,
    print_json,
    quiet_stdout,
    read_into,
    read_whole,
    render,
)
from services.cli.limits import LIST_PAGE_MAX
from services.cli.listing import LEDGERS, print_listing
from services.cli.progress import AppendProgress, ReadProgress, progress_wanted, stdout_is_terminal
from services.cli.stream_io import LedgerStreamAppender
from services.errors import QuireError
from services.limits import BATCH_ENTRIES_MAX

ledger_app = typer.Typer(
    help=(
        "Ledgers: create, append, read, close, recover, show, list, delete.\n\n"
        "Talks to the gateway of the global --gateway option (env QUIRE_GATEWAY) with its "
        "--token (env QUIRE_TOKEN); both go before 'ledger'.\n\n" + EXIT_CODES_HELP
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

LedgerId = Annotated[int, typer.Argument(min=0, show_default=False, help="the ledger id")]
Password = Annotated[
    str | None,
    typer.Option(
        "--password",
        envvar="QUIRE_LEDGER_PASSWORD",
        show_default=False,
        help="the ledger's password (sent as X-Ledger-Password, never printed)",
    ),
]
Quiet = Annotated[
    bool, typer.Option("--quiet", "-q", help="no progress bar (drawn only on a terminal anyway)")
]
Long = Annotated[
    bool,
    typer.Option("--long", "-l", help="a table with each one's details (one more call per item)"),
]


class Digest(StrEnum):
    crc32c = "crc32c"
    hmac_sha256 = "hmac-sha256"
    none = "none"


def _client(ctx: typer.Context, password: str | None = None) -> GatewayClient:
    options = global_options(ctx)
    return GatewayClient(options.gateway, options.token, password, ca_file=options.ca_file)


def _parse_meta(items: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"must be KEY=VALUE, got {item!r}", param_hint="--meta")
        out[key] = value
    return out


# -- create -----------------------------------------------------------------


@ledger_app.command()
def create(
    ctx: typer.Context,
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
    digest: Annotated[
        Digest | None,
        typer.Option(show_default=False, help="entry digest [default: crc32c]"),
    ] = None,
    password: Password = None,
    meta: Annotated[
        list[str] | None,
        typer.Option("--meta", "-m", show_default=False, help="custom metadata KEY=VALUE"),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="print only the new ledger's id")
    ] = False,
) -> None:
    """Create a ledger; the gateway that answers holds its write handle.

    Prints the ledger object (or only its id with --quiet). Appends to the
    ledger must go to the same gateway. Options left out take the gateway's
    defaults (E=3, Qw=2, Qa=2, crc32c); E >= Qw >= Qa >= 1.
    """
    body: dict[str, Any] = {}
    for key, value in (
        ("ensemble_size", ensemble),
        ("write_quorum", write_quorum),
        ("ack_quorum", ack_quorum),
    ):
        if value is not None:
            body[key] = value
    if digest is not None:
        body["digest"] = digest.value
    if password is not None:
        body["password"] = password
    if meta:
        body["metadata"] = _parse_meta(meta)
    with reported(), _client(ctx) as client:
        ledger = client.json("POST", "/v1/ledgers", json=body)
    if quiet:
        print(ledger["ledger_id"], flush=True)
    else:
        print_json(ledger)


# -- append -----------------------------------------------------------------


@ledger_app.command()
def append(
    ctx: typer.Context,
    ledger_id: LedgerId,
    data: Annotated[
        list[str] | None,
        typer.Argument(
            show_default=False,
            help="entries, one per argument (UTF-8); without any, read --file or stdin",
        ),
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file", "-f", show_default=False, help="read the entry (or lines) from this file"
        ),
    ] = None,
    lines: Annotated[
        bool,
        typer.Option("--lines", "-l", help="one entry per input line (without its newline)"),
    ] = False,
    batch: Annotated[
        int,
        typer.Option(min=1, max=BATCH_ENTRIES_MAX, help="entries per request with --lines"),
    ] = BATCH_ENTRIES_MAX,
    password: Password = None,
    quiet: Quiet = False,
    stream: Annotated[
        bool,
        typer.Option(
            "--stream",
            help="send the entries over one streaming append (WebSocket), many in flight, "
            "one acknowledgement each, instead of one request per entry or batch",
        ),
    ] = False,
) -> None:
    """Append entries to a ledger this gateway writes (the one that created it).

    Each DATA argument is one entry (several go in one batch, in order).
    Otherwise the input is --file (or stdin): the whole of it as one entry,
    or with --lines one entry per line, sent in batches of up to --batch
    entries. Prints a JSON summary: entries, bytes, first and last entry id,
    the LAC. Every entry is acknowledged by an ack quorum before the next
    request; if one fails, what was acknowledged before is reported on stderr.
    With --lines a progress bar shows on a terminal (stderr), unless --quiet.
    With --stream the entries go over one WebSocket with many in flight (each
    still acknowledged by an ack quorum, in order).
    """
    if data and file is not None:
        raise typer.BadParameter("give entries as arguments or --file, not both")
    with reported(), _client(ctx, password) as client:
        options = global_options(ctx)
        appender: LedgerAppender = (
            LedgerStreamAppender(options, password, ledger_id)
            if stream
            else Appender(client, ledger_id)
        )
        try:
            if data:
                payloads = [d.encode() for d in data]
                if len(payloads) == 1:
                    appender.single(payloads[0])
                else:
                    for chunk in batches(payloads, batch):
                        appender.batch(chunk)
            else:
                _append_input(appender, file, lines, batch, quiet)
            appender.finish()
        except QuireError:
            if appender.entries:
                err.print(
                    f"quire: {appender.entries} entries were acknowledged before the error "
                    f"(ids {appender.first_entry_id}..{appender.last_entry_id})",
                    markup=False,
                )
            raise
        finally:
            appender.close()
    print_json(appender.summary())


LedgerAppender = Appender | LedgerStreamAppender


def _append_input(
    appender: LedgerAppender, file: Path | None, lines: bool, batch: int, quiet: bool
) -> None:
    stdin = file is None or str(file) == "-"
    if file is None or stdin:
        stream, total, name = sys.stdin.buffer, None, "stdin"
        if sys.stdin.isatty():
            err.print("reading from the terminal; end with Ctrl-D", markup=False)
    else:
        try:
            stream = open(file, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            fail(f"cannot read {file}: {exc.strerror or exc}")
        total = os.fstat(stream.fileno()).st_size if file.is_file() else None
        name = str(file)
    try:
        if not lines:
            appender.single(read_whole(stream, name))
            return
        with AppendProgress(total, quiet) as progress:
            for chunk in batches(input_lines(stream), batch):
                appender.batch(chunk)
                # Each line also had its newline; close enough for a progress bar.
                progress.advance(appender.entries, sum(map(len, chunk)) + len(chunk))
    finally:
        if not stdin:
            stream.close()


# -- read -------------------------------------------------------------------


@ledger_app.command()
def read(
    ctx: typer.Context,
    ledger_id: LedgerId,
    first: Annotated[
        int | None,
        typer.Option("--from", min=0, show_default=False, help="first entry id [default: 0]"),
    ] = None,
    last: Annotated[
        int | None,
        typer.Option(
            "--to",
            min=0,
            show_default=False,
            help="last entry id, inclusive [default: the LAC, or the last entry once closed]",
        ),
    ] = None,
    output_format: Annotated[
        ReadFormat,
        typer.Option(
            "--format",
            help="text: each entry as a line; base64: its base64; json: "
            '{"entry_id", "data" (base64)} per line',
        ),
    ] = ReadFormat.text,
    raw: Annotated[
        bool,
        typer.Option("--raw", help="write the entries' bytes back to back, nothing in between"),
    ] = False,
    ids: Annotated[
        bool, typer.Option("--ids", help="start each text or base64 line with ENTRY_ID and a tab")
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            show_default=False,
            help="write to this file instead of stdout (with a progress bar on a terminal)",
        ),
    ] = None,
    password: Password = None,
    quiet: Quiet = False,
) -> None:
    """Read a range of entries, streamed (never fences an open ledger).

    An open ledger reads up to its LAC, a closed one up to its last entry.
    By default each entry is one line of text (undecodable bytes escaped);
    --raw writes the exact bytes. Into a file (--output, or stdout redirected)
    a progress bar shows on stderr when it is a terminal, unless --quiet.
    """
    if first is not None and last is not None and first > last:
        raise typer.BadParameter(f"--from ({first}) is after --to ({last})")
    params = {k: v for k, v in (("from", first), ("to", last)) if v is not None}
    show = progress_wanted(quiet, output_is_terminal=output is None and stdout_is_terminal())
    with reported(), _client(ctx, password) as client:
        total = entries_in_range(client, ledger_id, first or 0, last) if show else None
        try:
            sink = sys.stdout.buffer if output is None else open(output, "wb")  # noqa: SIM115
        except OSError as exc:
            fail(f"cannot write {output}: {exc.strerror or exc}")
        try:
            with ReadProgress(show, total) as progress:
                entry = lambda doc: render(doc, output_format, raw, ids)  # noqa: E731
                read_into(client, ledger_id, params, first or 0, sink, progress, entry, raw)
        except BrokenPipeError:
            quiet_stdout()
        finally:
            if output is not None:
                sink.close()


# -- show, list -------------------------------------------------------------


@ledger_app.command()
def show(ctx: typer.Context, ledger_id: LedgerId) -> None:
    """Print a ledger's metadata: state, quorums, fragments, length (no password needed)."""
    with reported(), _client(ctx) as client:
        print_json(client.json("GET", f"/v1/ledgers/{ledger_id}"))


@ledger_app.command("list")
def list_ledgers(
    ctx: typer.Context,
    limit: Annotated[
        int, typer.Option(min=1, max=LIST_PAGE_MAX, help="ledgers per page")
    ] = LIST_PAGE_MAX,
    after: Annotated[
        int | None,
        typer.Option(min=-1, show_default=False, help="list the ids after this one"),
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="follow the pages to the end")] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help='print {"ledgers": [...], "next": ID|null} (with --long also "details": '
            "[ledger objects])",
        ),
    ] = False,
    long: Long = False,
) -> None:
    """List ledger ids in ascending order: one page, or --all of them.

    On a terminal a table, piped one id per line; --long: a table with each
    ledger's state, quorums, last entry, length and creation time.
    """
    with reported(), _client(ctx) as client:
        print_listing(client, LEDGERS, limit, after, every, as_json, long)


# -- close, recover, delete ---------------------------------------------------


@ledger_app.command()
def close(ctx: typer.Context, ledger_id: LedgerId, password: Password = None) -> None:
    """Close a ledger as its writer (this gateway); closing again changes nothing.

    Prints the closed ledger object, with its last entry id and exact length.
    """
    with reported(), _client(ctx, password) as client:
        print_json(client.json("POST", f"/v1/ledgers/{ledger_id}/close", password=True))


@ledger_app.command()
def recover(ctx: typer.Context, ledger_id: LedgerId, password: Password = None) -> None:
    """Fence, recover and close an open ledger from any gateway (its writer is cut off).

    The writer's later adds fail with ledger_fenced. A closed ledger is
    returned unchanged. Prints the ledger object.
    """
    with reported(), _client(ctx, password) as client:
        print_json(client.json("POST", f"/v1/ledgers/{ledger_id}/recover", password=True))


@ledger_app.command()
def delete(
    ctx: typer.Context,
    ledger_ids: Annotated[
        list[int], typer.Argument(min=0, show_default=False, help="the ledger id(s)")
    ],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
    password: Password = None,
) -> None:
    """Delete ledgers and their entries on the bookies. Asks first unless --yes."""
    names = ", ".join(map(str, ledger_ids))
    if not yes:
        if not sys.stdin.isatty():
            fail(f"refusing to delete ledger {names} without --yes: stdin is not a terminal")
        if not typer.confirm(f"Delete ledger {names} and every entry in it?", default=False):
            fail("not confirmed; nothing deleted")
    with reported(), _client(ctx, password) as client:
        for ledger_id in ledger_ids:
            client.request("DELETE", f"/v1/ledgers/{ledger_id}", password=True)
            print(f"deleted ledger {ledger_id}", flush=True)
