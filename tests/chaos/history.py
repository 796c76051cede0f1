"""The chaos run's history: one JSON object per line, written as things happen.

Each operation of the workload is two records, its invocation and its completion, as in
Jepsen's histories: ``{"i", "t", "process", "type", "f", "value"}`` with ``type``
``invoke``, then ``ok`` (it happened), ``fail`` (it certainly did not: a clear refusal
such as 409 ``not_writer``) or ``unknown`` (it may or may not have happened: a time-out
or a reset after the request was sent, 409 ``ledger_fenced``, 503/504); a completion's
``ref`` is the index ``i`` of its invocation. Faults are records of type ``fault`` and
``heal`` (``ref``: the fault), from the process ``nemesis``. ``t`` is seconds on the
monotonic clock since the history began, so stalls and orders can be told.

The checker (tests/chaos/checker.py) reads a history back with ``read``; it never needs
the cluster, only the history and the final read-back.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

INVOKE, OK, FAIL, UNKNOWN, FAULT, HEAL = "invoke", "ok", "fail", "unknown", "fault", "heal"
COMPLETIONS = (OK, FAIL, UNKNOWN)
NEMESIS = "nemesis"


@dataclass(frozen=True)
class Record:
    """One line of a history."""

    i: int
    t: float
    process: str
    type: str
    f: str
    value: dict[str, Any] = field(default_factory=dict)
    ref: int | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "i": self.i,
            "t": round(self.t, 4),
            "process": self.process,
            "type": self.type,
            "f": self.f,
            "value": self.value,
        }
        if self.ref is not None:
            doc["ref"] = self.ref
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Record:
        return cls(
            doc["i"], doc["t"], doc["process"], doc["type"], doc["f"], doc["value"], doc.get("ref")
        )


class History:
    """Appends records to a file, one line each, flushed at once (a run that dies
    leaves every record it made); safe to use from many threads."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._file: IO[str] = open(path, "w")  # closed by close()
        self._next = 0
        self._start = time.monotonic()
        self.records: list[Record] = []

    def now(self) -> float:
        return time.monotonic() - self._start

    def _append(
        self, process: str, type_: str, f: str, value: dict[str, Any], ref: int | None
    ) -> Record:
        with self._lock:
            record = Record(self._next, self.now(), process, type_, f, value, ref)
            self._next += 1
            self.records.append(record)
            self._file.write(json.dumps(record.to_json(), separators=(",", ":")) + "\n")
            self._file.flush()
            return record

    def invoke(self, process: str, f: str, value: dict[str, Any]) -> Record:
        return self._append(process, INVOKE, f, value, None)

    def complete(self, invocation: Record, outcome: str, value: dict[str, Any]) -> Record:
        if outcome not in COMPLETIONS:
            raise ValueError(f"not a completion: {outcome}")
        return self._append(invocation.process, outcome, invocation.f, value, invocation.i)

    def fault(self, f: str, value: dict[str, Any]) -> Record:
        return self._append(NEMESIS, FAULT, f, value, None)

    def heal(self, fault: Record, value: dict[str, Any]) -> Record:
        return self._append(NEMESIS, HEAL, fault.f, value, fault.i)

    def close(self) -> None:
        with self._lock:
            self._file.close()


def read(path: Path) -> list[Record]:
    """Every record of the history at ``path``, in the order written."""
    return list(iter_records(path))


def iter_records(path: Path) -> Iterator[Record]:
    with open(path) as f:
        for line in f:
            if line.strip():
                yield Record.from_json(json.loads(line))
