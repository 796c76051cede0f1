"""The options of a Quire batch read, parsed and checked before anything is read.

    gateway            the gateway's URL (required), e.g. http://127.0.0.1:8080, or
                       several separated by commas, used in turn (client.py)
    token              the API token (Authorization: Bearer), when the gateway wants one
    password           the ledger password (X-Ledger-Password), for password ledgers
    log | ledgers      what to read: a log's name, or ledger ids "1,2,7" (exactly one)
    start, end         for a log only: positions "LID:EID"; the read starts AT start
                       and stops BEFORE end (both optional; "L:E+1" just past a closed
                       ledger's last entry is valid, as for a log read's "next")
    startingTimestamp  for a log only, instead of start: ms since the Unix epoch or
                       RFC 3339; the read starts at the first record stamped at or
                       after it (one call on the driver: the gateway's ``from_time``)
    partition_entries  target entries per partition (default 100,000)
    partition_bytes    target payload bytes per partition (default 64 MiB), estimated
                       from each ledger's length; a partition holds at most both
    caFile             a PEM bundle of the CAs that sign an https gateway's certificate
                       (default: the variable QUIRE_CA_FILE, else the system's bundle)
    certFile, keyFile  a certificate chain and its unencrypted key (PEM), for a gateway
                       that requires client certificates (both or neither)

The TLS options (``tls_options``) are every read's and write's, batch and streaming.
Spark hands options over case-insensitively (keys in lower case); options this
module does not know are left to the other parts of the connector. A bad option is a
``QuireSparkError`` with code ``invalid_option`` naming the option.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from services.errors import InvalidArgument
from services.protocol.logs import Position, check_log_name, parse_time
from services.spark.client import (
    INVALID_OPTION,
    QuireSparkError,
    TlsOptions,
    gateway_list,
    tls_context,
)
from services.spark.limits import (
    DEFAULT_PARTITION_BYTES,
    DEFAULT_PARTITION_ENTRIES,
    PARTITION_BYTES_MAX,
    PARTITION_BYTES_MIN,
    PARTITION_ENTRIES_MAX,
)

LEDGER_ID_MAX = (1 << 63) - 1
# The variable naming the CA bundle when the option caFile does not (the driver's).
CA_FILE_VARIABLE = "QUIRE_CA_FILE"
_URL = re.compile(r"https?://[^\s/]+(/\S*)?")
_ID = re.compile(r"0|[1-9][0-9]*")


@dataclass(frozen=True, slots=True)
class ReadOptions:
    gateway: str
    token: str | None
    password: str | None
    log: str | None
    ledgers: tuple[int, ...] | None
    start: Position | None
    end: Position | None
    partition_entries: int
    partition_bytes: int
    tls: TlsOptions
    starting_timestamp: int | None = None  # ms since the epoch


def bad(option: str, why: str) -> QuireSparkError:
    return QuireSparkError(INVALID_OPTION, f"option {option!r} {why}")


def _get(options: Mapping[str, str], key: str) -> str | None:
    """An option's value (Spark lower-cases keys; a plain dict may not have)."""
    for k, v in options.items():
        if k.lower() == key:
            return None if v is None else str(v)
    return None


def gateway_url(options: Mapping[str, str]) -> str:
    """The ``gateway`` option: one URL or several separated by commas, each checked,
    given back without spaces and trailing slashes."""
    text = _get(options, "gateway")
    urls = gateway_list(text or "")
    if not urls:
        raise bad("gateway", "is required: the gateway's URL, e.g. http://127.0.0.1:8080")
    for url in urls:
        if not _URL.fullmatch(url):
            raise bad("gateway", f"must be http:// or https:// URLs, not {url!r}")
    return ",".join(urls)


def _path(options: Mapping[str, str], key: str) -> str | None:
    text = _get(options, key)
    if text is None or not text.strip():
        return None
    return os.path.abspath(text.strip())


def tls_options(options: Mapping[str, str]) -> TlsOptions:
    """The options ``caFile`` (else the variable ``QUIRE_CA_FILE``), ``certFile`` and
    ``keyFile``, paths made absolute, their files loaded once here, on the driver: a
    file that cannot be used fails the job before any task runs, naming its option
    (executors read the same paths, and must have the same files)."""
    ca_file = _path(options, "cafile")
    source = "option 'caFile'"
    if ca_file is None and os.environ.get(CA_FILE_VARIABLE, "").strip():
        ca_file = os.path.abspath(os.environ[CA_FILE_VARIABLE].strip())
        source = f"the variable {CA_FILE_VARIABLE}"
    cert_file, key_file = _path(options, "certfile"), _path(options, "keyfile")
    if (cert_file is None) != (key_file is None):
        raise QuireSparkError(
            INVALID_OPTION,
            "give both options 'certFile' and 'keyFile' (a client certificate and its key) "
            "or neither",
        )
    tls = TlsOptions(ca_file, cert_file, key_file, source)
    tls_context(tls)
    return tls


def parse_ledgers(text: str) -> tuple[int, ...]:
    """``"1,2,7"`` → (1, 2, 7): non-negative ids, no duplicates, at least one."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not _ID.fullmatch(p) for p in parts):
        raise bad("ledgers", f'must be ledger ids separated by commas, e.g. "1,2,7", not {text!r}')
    ids = tuple(int(p) for p in parts)
    if any(i > LEDGER_ID_MAX for i in ids):
        raise bad("ledgers", f"has a ledger id out of range in {text!r}")
    if len(set(ids)) != len(ids):
        raise bad("ledgers", f"names a ledger twice in {text!r}")
    return ids


def parse_position(options: Mapping[str, str], key: str) -> Position | None:
    text = _get(options, key)
    if text is None:
        return None
    try:
        return Position.parse(text.strip(), key)
    except InvalidArgument as exc:
        raise bad(key, f"must be a position LID:EID, not {text!r}") from exc


def parse_int(options: Mapping[str, str], key: str, default: int, low: int, high: int) -> int:
    text = _get(options, key)
    if text is None:
        return default
    stripped = text.strip().replace("_", "")
    if not _ID.fullmatch(stripped) or not low <= int(stripped) <= high:
        raise bad(key, f"must be an integer from {low:,} to {high:,}, not {text!r}")
    return int(stripped)


def parse_timestamp(options: Mapping[str, str], key: str) -> int | None:
    """A time option: ms since the Unix epoch or RFC 3339 (the gateway's ``from_time``
    rule), as ms; None when not given."""
    text = _get(options, key)
    if text is None:
        return None
    try:
        return parse_time(text.strip(), "startingTimestamp")
    except InvalidArgument as exc:
        raise QuireSparkError(INVALID_OPTION, f"option {exc.message}") from exc


def parse_read_options(options: Mapping[str, str]) -> ReadOptions:
    """Check every read option; ``QuireSparkError`` (``invalid_option``) on the first
    bad one."""
    gateway = gateway_url(options)
    log = _get(options, "log")
    ledger_text = _get(options, "ledgers")
    if (log is None) == (ledger_text is None):
        raise QuireSparkError(
            INVALID_OPTION,
            "give exactly one of the options 'log' (a log's name) and 'ledgers' "
            '(ledger ids, e.g. "1,2,7")',
        )
    ledgers: tuple[int, ...] | None = None
    if log is not None:
        try:
            check_log_name(log)
        except InvalidArgument as exc:
            raise bad("log", str(exc)) from exc
    elif ledger_text is not None:
        ledgers = parse_ledgers(ledger_text)
    start = parse_position(options, "start")
    end = parse_position(options, "end")
    if ledgers is not None and (start is not None or end is not None):
        raise QuireSparkError(
            INVALID_OPTION, "the options 'start' and 'end' are for a log, not for 'ledgers'"
        )
    if start is not None and end is not None and start.ledger_id == end.ledger_id:
        if end.entry_id < start.entry_id:
            raise bad("end", f"{end} is before start {start}")
    starting_timestamp = parse_timestamp(options, "startingtimestamp")
    if starting_timestamp is not None and (ledgers is not None or start is not None):
        raise QuireSparkError(
            INVALID_OPTION,
            "the option 'startingTimestamp' is for a log, and instead of 'start'",
        )
    token = _get(options, "token")
    password = _get(options, "password")
    return ReadOptions(
        gateway=gateway,
        token=token or None,
        password=password,
        log=log,
        ledgers=ledgers,
        start=start,
        end=end,
        partition_entries=parse_int(
            options, "partition_entries", DEFAULT_PARTITION_ENTRIES, 1, PARTITION_ENTRIES_MAX
        ),
        partition_bytes=parse_int(
            options,
            "partition_bytes",
            DEFAULT_PARTITION_BYTES,
            PARTITION_BYTES_MIN,
            PARTITION_BYTES_MAX,
        ),
        tls=tls_options(options),
        starting_timestamp=starting_timestamp,
    )
