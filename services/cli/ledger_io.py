"""What ``quire ledger`` reads and writes: entries from arguments, files and stdin
(in batches, with a progress bar on a terminal), entries and objects to stdout or a
file."""

from __future__ import annotations

import base64
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from enum import StrEnum
from typing import IO, Any

from rich.console import Console

from services.cli.client import GatewayClient
from services.cli.limits import APPEND_BATCH_BYTES_MAX
from services.cli.progress import ReadProgress
from services.errors import PayloadTooLarge, QuireError
from services.limits import ENTRY_SIZE_MAX_BYTES

err = Console(stderr=True, highlight=False, soft_wrap=True)


class ReadFormat(StrEnum):
    text = "text"
    json = "json"
    base64 = "base64"


def print_json(doc: Any) -> None:
    """An object on stdout: indented and coloured on a terminal, one line otherwise."""
    if sys.stdout.isatty():
        Console(highlight=False, soft_wrap=True).print_json(data=doc)
    else:
        sys.stdout.write(json.dumps(doc) + "\n")
        sys.stdout.flush()


def input_lines(stream: IO[bytes]) -> Iterator[bytes]:
    """One entry per line, without its newline (a last line without one counts too)."""
    for line in stream:
        yield line[:-1] if line.endswith(b"\n") else line


def batches(entries: Iterable[bytes], entries_max: int) -> Iterator[list[bytes]]:
    """Consecutive batches of at most ``entries_max`` entries and about
    ``APPEND_BATCH_BYTES_MAX`` bytes of payload (a bigger entry goes alone)."""
    batch: list[bytes] = []
    size = 0
    for entry in entries:
        if batch and (len(batch) >= entries_max or size + len(entry) > APPEND_BATCH_BYTES_MAX):
            yield batch
            batch, size = [], 0
        batch.append(entry)
        size += len(entry)
    if batch:
        yield batch


def read_whole(stream: IO[bytes], name: str) -> bytes:
    """The whole input as one entry, refused (413) past the entry size limit without
    reading the rest."""
    data = stream.read(ENTRY_SIZE_MAX_BYTES + 1)
    if len(data) > ENTRY_SIZE_MAX_BYTES:
        raise PayloadTooLarge(
            f"{name} is over the entry size limit of {ENTRY_SIZE_MAX_BYTES} bytes "
            "(use --lines for one entry per line)"
        )
    return data


class Appender:
    """Sends entries in order, one request at a time, and sums up what was acknowledged."""

    def __init__(self, client: GatewayClient, ledger_id: int) -> None:
        self.client = client
        self.ledger_id = ledger_id
        self.path = f"/v1/ledgers/{ledger_id}/entries"
        self.entries = 0
        self.bytes = 0
        self.first_entry_id: int | None = None
        self.last_entry_id: int | None = None
        self.lac: int | None = None

    def single(self, payload: bytes) -> None:
        answer = self.client.json(
            "POST",
            self.path,
            content=payload,
            headers={"Content-Type": "application/octet-stream"},
            password=True,
        )
        self._acked(answer["entry_id"], answer["entry_id"], answer, 1, len(payload))

    def batch(self, payloads: list[bytes]) -> None:
        body = {"entries": [base64.b64encode(p).decode() for p in payloads]}
        answer = self.client.json("POST", self.path, json=body, password=True)
        size = sum(map(len, payloads))
        self._acked(answer["first_entry_id"], answer["last_entry_id"], answer, len(payloads), size)

    def finish(self) -> None:
        """Nothing to wait for: each request was answered (the stream's appender waits)."""

    def close(self) -> None:
        """Nothing to close (the client is the caller's)."""

    def _acked(self, first: int, last: int, answer: dict[str, Any], count: int, size: int) -> None:
        if self.first_entry_id is None:
            self.first_entry_id = first
        self.last_entry_id = last
        self.lac = answer.get("last_add_confirmed")
        self.entries += count
        self.bytes += size

    def summary(self) -> dict[str, Any]:
        return append_summary(
            self.ledger_id, self.entries, self.bytes, self.first_entry_id, self.last_entry_id,
            self.lac,
        )  # fmt: skip


def append_summary(
    ledger_id: int, entries: int, size: int, first: int | None, last: int | None, lac: int | None
) -> dict[str, Any]:
    """The JSON summary of ``quire ledger append`` (REST or ``--stream``)."""
    out: dict[str, Any] = {
        "ledger_id": ledger_id,
        "entries": entries,
        "bytes": size,
        "first_entry_id": first,
        "last_entry_id": last,
        "last_add_confirmed": lac,
    }
    if entries == 1:
        out["entry_id"] = first
    return out


def render(doc: dict[str, Any], output_format: ReadFormat, raw: bool, ids: bool) -> bytes:
    if raw:
        return base64.b64decode(str(doc["data"]))
    if output_format is ReadFormat.json:
        return json.dumps({"entry_id": doc["entry_id"], "data": doc["data"]}).encode() + b"\n"
    prefix = f"{doc['entry_id']}\t".encode() if ids else b""
    if output_format is ReadFormat.base64:
        return prefix + str(doc["data"]).encode() + b"\n"
    text = base64.b64decode(doc["data"]).decode("utf-8", errors="backslashreplace")
    return prefix + text.encode() + b"\n"


def quiet_stdout() -> None:
    """The reader went away (``| head``): stop quietly, without a traceback at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def entries_in_range(client: GatewayClient, ledger_id: int, first: int, last: int | None) -> int:
    """How many entries a read from ``first`` to ``last`` (or to the end) returns now, for
    the progress bar: up to the last entry of a closed ledger, the LAC of an open one."""
    ledger = client.json("GET", f"/v1/ledgers/{ledger_id}")
    if ledger.get("state") == "CLOSED":
        end = int(ledger["last_entry_id"])
    else:
        answer = client.json("GET", f"/v1/ledgers/{ledger_id}/lac", password=True)
        end = int(answer["last_add_confirmed"])
    if last is not None:
        end = min(end, last)
    return max(0, end - first + 1)


def read_into(
    client: GatewayClient,
    ledger_id: int,
    params: dict[str, int],
    first: int,
    sink: IO[bytes],
    progress: ReadProgress,
    to_bytes: Callable[[dict[str, Any]], bytes],
    flush_each: bool,
) -> None:
    """Stream the range as NDJSON into ``sink``, checking that entry ids follow on."""
    expected = first
    with client.stream(
        "GET",
        f"/v1/ledgers/{ledger_id}/entries",
        params=params,
        headers={"Accept": "application/x-ndjson"},
        password=True,
    ) as response:
        for line in response.iter_lines():
            if not line.strip():
                continue
            doc = json.loads(line)
            if doc.get("entry_id") != expected:
                raise QuireError(
                    f"expected entry {expected} from the gateway, got {doc.get('entry_id')}"
                )
            expected += 1
            data = to_bytes(doc)
            sink.write(data)
            progress.advance(len(data))
            if flush_each:
                sink.flush()
    sink.flush()
