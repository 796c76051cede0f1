"""Scoped tokens: the token file's format and what each ``/v1`` call needs, as pure
functions (no I/O; gateway/http/token_file.py reads and reloads the file,
gateway/http/auth.py applies the decisions). docs/api.md "Scoped tokens" and
docs/security.md "Scoped tokens" are the operator's view.

The file is TOML, one ``[[token]]`` table per token::

    [[token]]
    name = "orders-writer"          # a label for the operator and the 403 messages
    sha256 = "9f86d081884c7d65..."  # SHA-256 of the token, hex; never the token itself
    scope = "write"                 # read | write | admin
    logs = ["orders-*", "audit"]    # log names, or prefixes ending in *; "*": every log
    ledgers = [7, "100-199"]        # ledger ids, or inclusive ranges; "*": every ledger

Only the token's SHA-256 is stored, so that a leaked or world-readable file does not
hand out the tokens; a ``token`` key holding the token itself is refused (the one line
saying so never repeats its value). Tokens are long random strings (``openssl rand -hex
32`` makes one), which makes an unsalted fast hash safe here:
there is no dictionary to try against it.

The scopes grow: ``read`` is GET (and HEAD) of what the token covers; ``write`` adds
creating, adding, appending, closing, recovering, rolling and taking a log's writer
role, never deleting; ``admin`` adds deleting, truncating and changing a log's
retention policy (``PATCH /v1/logs/{name}``), and the Admin API's
actions. What a call is on:

- a ledger's routes (``/v1/ledgers/{id}...``): that ledger id;
- a log's routes (``/v1/logs/{name}...``): that log's name (the ledgers a log makes are
  reached through the log, whatever ids they get);
- ``GET /v1/ledgers`` (the list) and ``POST /v1/ledgers`` (creating a ledger): every
  ledger: a new ledger's id is not known before it exists, so a token limited to some
  ids cannot create one (logs create their ledgers themselves);
- ``GET /v1/logs?prefix=P``: the logs named ``P...``: a ``P0-*`` pattern covers it when
  ``P`` starts with ``P0-``; without a prefix, every log;
- the Admin API (``/v1/admin/...``): the cluster, which only a token covering every
  ledger and every log covers; its GETs need ``read`` (the admin page of a read token
  shows the cluster), its actions ``admin``;
- any other ``/v1`` path: nothing in particular (a known token gets its 404).

Lookups are by the SHA-256 of the presented token: the digest of a secret is compared,
never the secret, and the final comparison is ``hmac.compare_digest``; what a lookup's
timing could tell is about the hash of what was sent, which says nothing of a stored
token.
"""

from __future__ import annotations

import bisect
import hashlib
import hmac
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any
from urllib.parse import parse_qsl

from gateway import limits
from services.limits import ID_MAX

_HEX_SHA256 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9._@:/-]{1,64}")
_LOG_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,200}\*?")
_LEDGER_RANGE = re.compile(r"(0|[1-9][0-9]{0,18})(?:-(0|[1-9][0-9]{0,18}))?")
_CANONICAL_ID = re.compile(r"0|[1-9][0-9]{0,18}")
_TOKEN_KEYS = {"name", "sha256", "scope", "ledgers", "logs"}
_ADMIN_PREFIX = "/v1/admin"
_READS = ("GET", "HEAD")


class TokenFileError(ValueError):
    """The token file cannot be used; the message says where, never a token or a hash."""


class Scope(IntEnum):
    """What a token may do, each scope including the ones below it."""

    READ = 1
    WRITE = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        return self.name.lower()


class Target:
    """What a call is on (the kinds of ``Access.target``)."""

    NOTHING = "nothing"
    CLUSTER = "cluster"
    ALL_LEDGERS = "all ledgers"
    LEDGER = "ledger"
    LOG = "log"
    LOG_PREFIX = "logs named"


@dataclass(frozen=True)
class Access:
    """What one call needs: a scope on a target (a ledger id, a log name, the logs of a
    listing prefix, every ledger, the cluster, or nothing)."""

    scope: Scope
    target: str
    ledger_id: int | None = None
    name: str = ""

    def describe(self) -> str:
        """The missing scope in words, for the 403 message."""
        on = {
            Target.NOTHING: "",
            Target.CLUSTER: " on the cluster (every ledger and every log)",
            Target.ALL_LEDGERS: " on every ledger",
            Target.LEDGER: f" on ledger {self.ledger_id}",
            Target.LOG: f" on log {self.name!r}",
            Target.LOG_PREFIX: f" on the logs named {self.name!r}...",
        }[self.target]
        return f"the {self.scope.label} scope{on}"


def required_access(method: str, path: str, query: bytes = b"", websocket: bool = False) -> Access:
    """What a ``/v1`` call needs (the module docstring). A WebSocket on a ledger or log
    appends (``write``); a method a route does not take is judged as a write, and the
    router answers its 405 to a token allowed that far."""
    reading = method in _READS and not websocket
    if path == _ADMIN_PREFIX or path.startswith(_ADMIN_PREFIX + "/"):
        return Access(Scope.READ if reading else Scope.ADMIN, Target.CLUSTER)
    parts = path.split("/")  # "", "v1", kind, id or name, rest...
    if len(parts) < 3 or parts[1] != "v1" or parts[2] not in ("ledgers", "logs"):
        return Access(Scope.READ, Target.NOTHING)
    if method == "DELETE":
        scope = Scope.ADMIN
    elif reading:
        scope = Scope.READ
    elif parts[2] == "logs" and len(parts) == 5 and parts[4] == "truncate":
        scope = Scope.ADMIN  # truncating deletes ledgers
    elif parts[2] == "logs" and len(parts) == 4 and method == "PATCH":
        scope = Scope.ADMIN  # a retention policy removes data
    else:
        scope = Scope.WRITE
    if parts[2] == "ledgers":
        if len(parts) == 3 or not _CANONICAL_ID.fullmatch(parts[3]):
            return Access(scope, Target.ALL_LEDGERS)  # the list, a creation, a bad id (400)
        return Access(scope, Target.LEDGER, ledger_id=int(parts[3]))
    if len(parts) == 3:
        prefixes = {v for k, v in parse_qsl(query.decode("latin-1"), True) if k == "prefix"}
        # One prefix, or several that differ (whichever the route takes): judged as none.
        prefix = prefixes.pop() if len(prefixes) == 1 else ""
        return Access(scope, Target.LOG_PREFIX, name=prefix)
    return Access(scope, Target.LOG, name=parts[3])


@dataclass(frozen=True)
class TokenEntry:
    """One token of the file: its name, the SHA-256 of the token, its scope and what it
    covers (ledger ranges merged and sorted; log names and prefixes)."""

    name: str
    digest: bytes
    scope: Scope
    all_ledgers: bool
    ledger_starts: tuple[int, ...]
    ledger_ends: tuple[int, ...]
    all_logs: bool
    log_names: frozenset[str]
    log_prefixes: tuple[str, ...]

    def covers_ledger(self, ledger_id: int) -> bool:
        if self.all_ledgers:
            return True
        at = bisect.bisect_right(self.ledger_starts, ledger_id) - 1
        return at >= 0 and ledger_id <= self.ledger_ends[at]

    def covers_log(self, name: str) -> bool:
        return (
            self.all_logs
            or name in self.log_names
            or any(name.startswith(prefix) for prefix in self.log_prefixes)
        )

    def covers(self, access: Access) -> bool:
        target = access.target
        if target == Target.NOTHING:
            return True
        if target == Target.CLUSTER:
            return self.all_ledgers and self.all_logs
        if target == Target.ALL_LEDGERS:
            return self.all_ledgers
        if target == Target.LEDGER:
            return access.ledger_id is not None and self.covers_ledger(access.ledger_id)
        if target == Target.LOG:
            return self.covers_log(access.name)
        # A listing prefix: only patterns cover it (an exact name does not cover the
        # other names that start with it).
        return self.all_logs or any(access.name.startswith(p) for p in self.log_prefixes)

    def grants(self, access: Access) -> bool:
        return self.scope >= access.scope and self.covers(access)


@dataclass(frozen=True)
class TokenTable:
    """The tokens of one version of the file, by the SHA-256 of the token."""

    by_digest: dict[bytes, TokenEntry]

    def lookup(self, token: bytes) -> TokenEntry | None:
        """The entry of ``token``, or None for a token the file does not know."""
        digest = hashlib.sha256(token).digest()
        entry = self.by_digest.get(digest)
        if entry is None or not hmac.compare_digest(entry.digest, digest):
            return None
        return entry

    def __len__(self) -> int:
        return len(self.by_digest)


def token_digest(token: str) -> str:
    """The SHA-256 hex a token file stores for ``token`` (``sha256sum`` of its bytes)."""
    return hashlib.sha256(token.encode()).hexdigest()


def parse_tokens(text: str) -> TokenTable:
    """The tokens of a token file's text; ``TokenFileError`` naming the first problem
    (which token, which key), never a value of ``token`` or ``sha256``."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TokenFileError(f"not valid TOML: {exc}") from None
    unknown = set(doc) - {"token"}
    if unknown:
        raise TokenFileError(f"unknown top-level keys {sorted(unknown)} (only [[token]] tables)")
    tables = doc.get("token", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise TokenFileError("'token' must be an array of tables ([[token]])")
    if len(tables) > limits.TOKENS_MAX:
        raise TokenFileError(f"{len(tables)} tokens, more than {limits.TOKENS_MAX}")
    by_digest: dict[bytes, TokenEntry] = {}
    names: set[str] = set()
    for index, table in enumerate(tables):
        entry = _entry(index, table)
        if entry.name in names:
            raise TokenFileError(f"token {entry.name!r}: the name is used twice")
        if entry.digest in by_digest:
            raise TokenFileError(f"token {entry.name!r}: the same sha256 as another token")
        names.add(entry.name)
        by_digest[entry.digest] = entry
    return TokenTable(by_digest)


def _entry(index: int, table: dict[str, Any]) -> TokenEntry:
    name = table.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise TokenFileError(
            f"token #{index + 1}: 'name' must be 1 to 64 characters of A-Za-z0-9._@:/-"
        )
    where = f"token {name!r}"
    if "token" in table:
        raise TokenFileError(
            f"{where}: store the token's SHA-256 in 'sha256', never the token itself"
        )
    unknown = set(table) - _TOKEN_KEYS
    if unknown:
        raise TokenFileError(f"{where}: unknown keys {sorted(unknown)}")
    digest = table.get("sha256")
    if not isinstance(digest, str) or not _HEX_SHA256.fullmatch(digest.lower()):
        raise TokenFileError(f"{where}: 'sha256' must be 64 hex digits")
    scope = table.get("scope")
    if scope not in ("read", "write", "admin"):
        raise TokenFileError(f"{where}: 'scope' must be read, write or admin")
    if "ledgers" not in table and "logs" not in table:
        raise TokenFileError(f"{where}: covers nothing: give 'ledgers', 'logs' or both")
    all_ledgers, starts, ends = _ledgers(where, table.get("ledgers", []))
    all_logs, exact, prefixes = _logs(where, table.get("logs", []))
    return TokenEntry(
        name=name,
        digest=bytes.fromhex(digest),
        scope=Scope[scope.upper()],
        all_ledgers=all_ledgers,
        ledger_starts=starts,
        ledger_ends=ends,
        all_logs=all_logs,
        log_names=exact,
        log_prefixes=prefixes,
    )


def _items(where: str, key: str, value: object) -> list[object]:
    if value == "*":
        return ["*"]
    if not isinstance(value, list):
        raise TokenFileError(f"{where}: '{key}' must be a list or \"*\"")
    if len(value) > limits.TOKEN_COVERS_MAX:
        raise TokenFileError(f"{where}: more than {limits.TOKEN_COVERS_MAX} '{key}' items")
    return value


def _ledgers(where: str, value: object) -> tuple[bool, tuple[int, ...], tuple[int, ...]]:
    ranges: list[tuple[int, int]] = []
    for item in _items(where, "ledgers", value):
        if item == "*":
            return True, (), ()
        if isinstance(item, int) and not isinstance(item, bool) and 0 <= item <= ID_MAX:
            ranges.append((item, item))
            continue
        match = _LEDGER_RANGE.fullmatch(item) if isinstance(item, str) else None
        first = int(match.group(1)) if match else -1
        last = int(match.group(2) or first) if match else -1
        if match is None or not first <= last <= ID_MAX:
            raise TokenFileError(
                f"{where}: 'ledgers' items are ids, \"FIRST-LAST\" ranges (FIRST <= LAST) "
                f'or "*", got {item!r}'
            )
        ranges.append((first, last))
    merged = _merge(ranges)
    return False, tuple(r[0] for r in merged), tuple(r[1] for r in merged)


def _merge(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


def _logs(where: str, value: object) -> tuple[bool, frozenset[str], tuple[str, ...]]:
    exact: set[str] = set()
    prefixes: set[str] = set()
    for item in _items(where, "logs", value):
        if item == "*":
            return True, frozenset(), ()
        if not isinstance(item, str) or not _LOG_PATTERN.fullmatch(item):
            raise TokenFileError(
                f"{where}: 'logs' items are log names, prefixes ending in * or \"*\", got {item!r}"
            )
        if item.endswith("*"):
            prefixes.add(item[:-1])
        else:
            exact.add(item)
    return False, frozenset(exact), tuple(sorted(prefixes))
