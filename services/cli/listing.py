"""Paged listings of ``quire`` (``ledger list``, ``log list``): three ways to print one.

- ``--json``: one object ``{FIELD: [...], "next": ID|NAME|null}`` (the API's page, or
  every page's items with ``--all``); with ``--long`` also ``"details": [...]``, the
  object of each item (``GET /v1/ledgers/{id}`` or ``/v1/logs/{name}``; null for one
  deleted in between), in the same order.
- a rich table when stdout is a terminal, or always with ``--long`` (its columns are
  the items' objects; one extra call per item, so up to ``--limit`` calls a page);
- one item per line otherwise (piped or redirected): the form scripts relied on before
  the table, kept as it was.

Where to go on (``more after X``) goes to stderr in the last two forms.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from services.cli.client import GatewayClient, pages
from services.cli.common import human_bytes
from services.cli.ledger_io import err, print_json
from services.cli.progress import stdout_is_terminal
from services.errors import NotFound

# Tables piped or logged are not squeezed into 80 columns (rich's default off a terminal).
PIPED_WIDTH_COLUMNS = 200


def table_console() -> Console:
    """Tables on stdout: the terminal's width, or wide enough for whole lines when piped."""
    width = None if stdout_is_terminal() else PIPED_WIDTH_COLUMNS
    return Console(highlight=False, soft_wrap=False, file=sys.stdout, width=width)


def dash(value: Any) -> str:
    return "-" if value is None else str(value)


def when_ms(ms: int | None) -> str:
    """Milliseconds since the epoch as UTC time, ``-`` when unknown."""
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


@dataclass(frozen=True, slots=True)
class Listing:
    """One listing: the API path, the answer's field, how its items look in a table."""

    path: str  # "/v1/ledgers"
    field: str  # "ledgers"
    title: str
    key_column: str
    long_columns: tuple[str, ...]
    long_row: Callable[[dict[str, Any] | None], list[str]]

    def detail(self, client: GatewayClient, item: Any) -> dict[str, Any] | None:
        try:
            doc: dict[str, Any] = client.json("GET", f"{self.path}/{item}")
        except NotFound:
            return None  # deleted since the listing was read
        return doc

    def table(self, items: list[Any], details: list[dict[str, Any] | None] | None) -> Table:
        table = Table(title=self.title, title_justify="left")
        table.add_column(self.key_column, no_wrap=True, overflow="fold")
        if details is not None:
            for column in self.long_columns:
                table.add_column(column)
        for index, item in enumerate(items):
            row = [str(item)]
            if details is not None:
                row += self.long_row(details[index])
            table.add_row(*row)
        return table


def _ledger_row(doc: dict[str, Any] | None) -> list[str]:
    if doc is None:
        return ["deleted", "", "", "", "", ""]
    quorums = f"{doc.get('ensemble_size')}/{doc.get('write_quorum')}/{doc.get('ack_quorum')}"
    return [
        str(doc.get("state")),
        quorums,
        dash(doc.get("last_entry_id")),
        human_bytes(doc.get("length")),
        str(len(doc.get("fragments") or [])),
        when_ms(doc.get("created_at")),
    ]


def _log_row(doc: dict[str, Any] | None) -> list[str]:
    if doc is None:
        return ["deleted", "", ""]
    ledgers = doc.get("ledgers") or []
    writer = doc.get("writer") or {}
    shown = ", ".join(map(str, ledgers[-3:]))
    return [
        str(len(ledgers)),
        ("…, " if len(ledgers) > 3 else "") + shown if ledgers else "-",
        f"{writer['gateway']} (epoch {writer.get('epoch')})" if writer else "-",
    ]


LEDGERS = Listing(
    "/v1/ledgers",
    "ledgers",
    "Ledgers",
    "ledger",
    ("state", "E/Qw/Qa", "last entry", "length", "fragments", "created (UTC)"),
    _ledger_row,
)
LOGS = Listing(
    "/v1/logs",
    "logs",
    "Logs",
    "log",
    ("ledgers", "last ledgers", "writer"),
    _log_row,
)


def print_listing(
    client: GatewayClient,
    listing: Listing,
    limit: int,
    after: int | str | None,
    every: bool,
    as_json: bool,
    long: bool = False,
) -> None:
    """One page of ``listing`` or, with ``every``, all of them, printed as the module
    docstring says."""
    as_table = long or stdout_is_terminal()
    collected: list[Any] = []
    next_after: Any = after
    for page in pages(client, listing.path, limit, after, every):
        if as_json or as_table:
            collected += page[listing.field]
        else:
            for item in page[listing.field]:
                sys.stdout.write(f"{item}\n")
            sys.stdout.flush()
        next_after = page.get("next")
    details = [listing.detail(client, item) for item in collected] if long else None
    if as_json:
        doc: dict[str, Any] = {listing.field: collected, "next": next_after}
        if details is not None:
            doc["details"] = details
        print_json(doc)
        return
    if as_table:
        if collected:
            table_console().print(listing.table(collected, details))
        else:
            err.print(f"no {listing.field}", markup=False)
    if next_after is not None:
        err.print(f"more after {next_after}: --after {next_after}, or --all", markup=False)
