"""Console output of the ``quire`` commands (and of the local clusters and benchmarks they
run): results on stdout, progress and trouble on stderr.

Progress is a rich spinner on a terminal and plain lines otherwise (so logs
and tests see it too). Nothing here wraps lines: one message is one line.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from rich.console import Console


class Ui:
    """Where a command talks: stdout for its results, stderr for progress and trouble."""

    def __init__(self, prog: str = "quire", out: IO[str] | None = None, err: Console | None = None):
        self.prog = prog
        self.out = out
        self.err = err or Console(stderr=True, highlight=False, soft_wrap=True)

    def started(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def note(self, message: str) -> None:
        self.err.print(message, markup=False)

    def error(self, message: str) -> None:
        self.err.print(f"{self.prog}: error: {message}", markup=False, style="bold red")

    @contextmanager
    def progress(self, message: str) -> Iterator[None]:
        if self.err.is_terminal:
            with self.err.status(message):
                yield
        else:
            self.note(message)
            yield
