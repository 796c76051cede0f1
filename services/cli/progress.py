"""Progress bars of the ``quire`` commands that move data: appends from a file or stdin,
reads into a file (``--output``, or stdout redirected).

One rule for all of them: a bar is drawn on stderr only when stderr is a terminal,
and never with ``--quiet`` or ``--json``; otherwise these classes do nothing, so what
scripts capture (stdout and stderr) holds no progress noise. Reads draw one only when
their output goes to a file: entries printed on the terminal would tear the bar.
The bar is transient (it is gone when the command ends) and updated at most every
``PROGRESS_UPDATE_EVERY_ITEMS`` items, so a read of a million small entries is not slowed by it.
"""

from __future__ import annotations

import sys
from typing import Self

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)

from services.cli.common import human_bytes
from services.cli.limits import PROGRESS_UPDATE_EVERY_ITEMS

err = Console(stderr=True, highlight=False, soft_wrap=True)


def progress_wanted(quiet: bool = False, output_is_terminal: bool = False) -> bool:
    """Whether to draw a bar: stderr is a terminal, not ``--quiet``, and the results do not
    go to that terminal too."""
    return err.is_terminal and not quiet and not output_is_terminal


def stdout_is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced or closed stdout
        return False


class _Bar:
    """A transient rich bar, or nothing when not ``enabled``."""

    def __init__(self, enabled: bool) -> None:
        self.bar: Progress | None = None
        self.enabled = enabled

    def __enter__(self) -> Self:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


class AppendProgress(_Bar):
    """Bytes of the input sent so far (of the file's size when known), entries, rate."""

    def __init__(self, total_bytes: int | None, quiet: bool = False, noun: str = "entries"):
        super().__init__(progress_wanted(quiet))
        if not self.enabled:
            return
        self.bar = Progress(
            TextColumn("appending"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TextColumn("{task.fields[count]:,} " + noun),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        )
        self.task = self.bar.add_task("append", total=total_bytes, count=0)

    def advance(self, count: int, size: int) -> None:
        """``count`` items acknowledged so far; ``size`` more bytes of input consumed."""
        if self.bar is not None:
            self.bar.update(self.task, advance=size, count=count)


class ReadProgress(_Bar):
    """Entries (or records) written so far, of ``total`` when known, with the bytes and
    the rate; updated every ``PROGRESS_UPDATE_EVERY_ITEMS`` items."""

    def __init__(self, enabled: bool, total: int | None, noun: str = "entries") -> None:
        super().__init__(enabled)
        self.items = 0
        self.bytes = 0
        self._shown = 0
        if not self.enabled:
            return
        self.bar = Progress(
            SpinnerColumn(),
            TextColumn("reading"),
            BarColumn(),
            MofNCompleteColumn() if total is not None else TextColumn("{task.completed:,.0f}"),
            TextColumn(noun),
            TextColumn("{task.fields[size]}"),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        )
        self.task = self.bar.add_task("read", total=total, size="")

    def advance(self, size: int) -> None:
        """One more item of ``size`` bytes written."""
        self.items += 1
        self.bytes += size
        if self.bar is not None and self.items - self._shown >= PROGRESS_UPDATE_EVERY_ITEMS:
            self._show()

    def advance_many(self, count: int, size: int) -> None:
        """``count`` more items of ``size`` bytes in all written."""
        self.items += count
        self.bytes += size
        if self.bar is not None and self.items - self._shown >= PROGRESS_UPDATE_EVERY_ITEMS:
            self._show()

    def _show(self) -> None:
        if self.bar is None:
            return
        self._shown = self.items
        self.bar.update(self.task, completed=self.items, size=human_bytes(self.bytes))

    def __exit__(self, *exc: object) -> None:
        self._show()
        super().__exit__(*exc)
