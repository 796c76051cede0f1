"""The gateway's token file (``--token-file``): read at start, read again when it
changes, without a restart (the format and the decisions: gateway/http/scopes.py).

The first read happens when the application is built: a file that cannot be used then
stops the gateway with one line (gateway/__main__.py). Afterwards ``watch``, a task of
the application's lifespan, looks at the file's modification time, size and inode every
``TOKEN_FILE_POLL_S`` and reads it again when one changed (an editor's rename or an
in-place write), and at once on SIGHUP. A version that cannot be used (bad TOML, a bad
token, too large, unreadable, gone) keeps the tokens in force and logs one line saying
why; the next change is tried again. The swap is one assignment, so a call is judged
wholly by the old tokens or wholly by the new. Nothing here logs a token or a hash:
only the file's path, the token count and the names.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path

from gateway import limits
from gateway.http.scopes import TokenFileError, TokenTable, parse_tokens
from services.web.sighup import on_sighup

log = logging.getLogger(__name__)


def read_tokens(path: Path) -> tuple[TokenTable, tuple[int, int, int]]:
    """The tokens of the file at ``path`` and the (mtime ns, size, inode) they were read
    at; ``TokenFileError`` when it cannot be read or used."""
    try:
        with path.open("rb") as file:
            stat = os.fstat(file.fileno())
            if stat.st_size > limits.TOKEN_FILE_SIZE_MAX_BYTES:
                raise TokenFileError(
                    f"{stat.st_size} bytes, more than {limits.TOKEN_FILE_SIZE_MAX_BYTES}"
                )
            raw = file.read(limits.TOKEN_FILE_SIZE_MAX_BYTES + 1)
    except OSError as exc:
        raise TokenFileError(f"cannot read it: {exc.strerror or exc}") from None
    if len(raw) > limits.TOKEN_FILE_SIZE_MAX_BYTES:
        raise TokenFileError(f"more than {limits.TOKEN_FILE_SIZE_MAX_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TokenFileError("not UTF-8") from None
    return parse_tokens(text), (stat.st_mtime_ns, stat.st_size, stat.st_ino)


def _version(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size, stat.st_ino


class TokenFile:
    """The tokens in force from one file; ``table`` is swapped whole on a reload."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.table, self.version = read_tokens(path)
        # The version whose reload failed: logged once, tried again when it changes.
        self.failed: tuple[int, int, int] | None = None

    def reload(self) -> bool:
        """Read the file again; on success its tokens are in force (True), else the old
        ones stay and one line says why (False)."""
        try:
            table, version = read_tokens(self.path)
        except TokenFileError as exc:
            self.failed = _version(self.path)
            log.error(
                "token file %s not reloaded: %s; the %d tokens in force stay",
                self.path,
                exc,
                len(self.table),
            )
            return False
        self.table, self.version, self.failed = table, version, None
        log.info("token file %s reloaded: %d tokens", self.path, len(table))
        return True

    def changed(self) -> bool:
        """Whether the file is not the version in force nor the one that failed."""
        now = _version(self.path)
        return now != self.version and now != self.failed

    async def watch(self) -> None:
        """Reload when the file changes (polled) and on SIGHUP, until cancelled."""
        asked = asyncio.Event()
        stop_listening = on_sighup(asked.set)
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(limits.TOKEN_FILE_POLL_S):
                        await asked.wait()
                if asked.is_set():
                    asked.clear()
                    self.reload()
                elif self.changed():
                    self.reload()
        finally:
            stop_listening()
