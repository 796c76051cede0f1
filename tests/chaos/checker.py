"""The chaos run's checker: a history (tests/chaos/history.py) and the final read-back
of the cluster in, the violations out. Pure: no I/O, no clock; unit-tested with
hand-made histories that break each property (tests/unit/chaos/test_checker.py).

The final read-back (``Final``, written by tests/chaos/run.py as ``final.json`` once
every fault is healed and every ledger closed) holds, for each gateway, what it reads of
every ledger and log the workload touched; every ledger's metadata; what each bookie
stores of each ledger (``POST /v1/stored``); and how long the under-replicated list took
to empty. Payloads are text: the workload's records are ASCII, and the read-back decodes
bytes as Latin-1, so any byte read back compares exactly.

The properties (docs/protocol.md and docs/logs.md give the rules):

- ``acknowledged``: every acknowledged entry and log record is readable from every
  gateway with its exact bytes, at the id or position its acknowledgement named;
- ``phantom``: nothing is read back that no client ever sent to that ledger or log;
- ``agreement``: a ledger is CLOSED on every gateway with one last entry id (the one any
  acknowledged close answered) and the same entries 0..last; a log reads the same on
  every gateway;
- ``one_writer``: no two gateways took the same epoch of a log, and an acknowledged
  append sits in a ledger a gateway of the cluster made as the log's writer (any
  gateway forwards an append to the writer's, docs/logs.md "Any gateway appends");
- ``exactly_once``: the records of an Idempotency-Key appear at most once, and those of
  an acknowledged key exactly once; a key acknowledged before another was first sent
  comes first in the log;
- ``prefix``: what a tailing reader read of a log, in order, is a prefix of the log's
  final order; what a ledger reader read is what the ledger holds;
- ``position``: a log read from a position the cluster handed out (a ``next``; the
  workload truncates nothing) is never refused as bad input (400): a gateway that cannot
  tell, cut from ZooKeeper, answers 503 to be retried;
- ``replication``: with the faults healed and every ledger closed, the under-replicated
  list emptied within its bound;
- ``placement``: every bookie a fragment names holds the fragment's entries of its
  write sets (read from the bookies themselves);
- ``complete``: every invocation has its completion (a worker that died mid-operation
  is a bug of the suite).
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from services.protocol.quorum import write_set
from tests.chaos.history import COMPLETIONS, FAULT, HEAL, INVOKE, OK, UNKNOWN, Record

# The custom metadata key a log writer's own ledgers carry: the gateway that made them
# (docs/logs.md).
WRITER_KEY = "quire.log.writer"
# Operations whose acknowledgement is a write: the stall figures measure gaps between them.
WRITES = ("ledger_add", "log_append")

Final = dict[str, Any]
Position = tuple[int, int]


@dataclass(frozen=True)
class Violation:
    """One broken property: which, and what was seen."""

    check: str
    message: str

    def __str__(self) -> str:
        return f"{self.check}: {self.message}"


@dataclass(frozen=True)
class Operation:
    """An invocation and its completion (None if it never completed)."""

    invoke: Record
    completion: Record | None

    @property
    def f(self) -> str:
        return self.invoke.f

    @property
    def outcome(self) -> str:
        return self.completion.type if self.completion is not None else UNKNOWN

    @property
    def value(self) -> dict[str, Any]:
        return self.invoke.value

    @property
    def result(self) -> dict[str, Any]:
        return self.completion.value if self.completion is not None else {}

    @property
    def ok(self) -> bool:
        return self.outcome == OK


def operations(records: Iterable[Record]) -> list[Operation]:
    """Invocations paired with their completions, in invocation order."""
    invocations: dict[int, Record] = {}
    completions: dict[int, Record] = {}
    for r in records:
        if r.type == INVOKE:
            invocations[r.i] = r
        elif r.type in COMPLETIONS and r.ref is not None:
            completions[r.ref] = r
    return [Operation(inv, completions.get(i)) for i, inv in sorted(invocations.items())]


def check(records: Sequence[Record], final: Final) -> list[Violation]:
    """Every violation of the properties above, in the order of the checks."""
    ops = operations(records)
    found: list[Violation] = []
    for rule in (
        complete,
        acknowledged_entries,
        ledgers_agree,
        phantom_entries,
        logs_agree,
        acknowledged_records,
        exactly_once,
        one_writer,
        readers_see_prefixes,
        positions_accepted,
        replication,
        placement,
    ):
        found += rule(ops, final)
    return found


# ---------------------------------------------------------------- ledgers


def _ledger_reads(final: Final, ledger_id: int) -> dict[str, dict[str, Any]]:
    reads: dict[str, dict[str, Any]] = final["ledgers"].get(str(ledger_id), {})
    return reads


def _entries(read: dict[str, Any]) -> dict[int, str]:
    return {int(eid): data for eid, data in read.get("entries") or []}


def complete(ops: list[Operation], final: Final) -> list[Violation]:
    return [
        Violation("complete", f"{op.invoke.process} never completed {op.f} #{op.invoke.i}")
        for op in ops
        if op.completion is None
    ]


def acknowledged_entries(ops: list[Operation], final: Final) -> list[Violation]:
    found = []
    entries: dict[tuple[int, str], dict[int, str]] = {}  # each read's entries, made once
    for op in ops:
        if op.f != "ledger_add" or not op.ok:
            continue
        lid, first = op.value["ledger_id"], op.result["first_entry_id"]
        for gateway in final["gateways"]:
            read = _ledger_reads(final, lid).get(gateway)
            if read is None or "error" in read:
                why = read["error"] if read else "not read back"
                found.append(Violation("acknowledged", f"ledger {lid} on {gateway}: {why}"))
                continue
            if (lid, gateway) not in entries:
                entries[(lid, gateway)] = _entries(read)
            held = entries[(lid, gateway)]
            for offset, data in enumerate(op.value["entries"]):
                eid = first + offset
                if held.get(eid) != data:
                    found.append(
                        Violation(
                            "acknowledged",
                            f"ledger {lid} entry {eid} on {gateway}: acknowledged {data!r} "
                            f"(#{op.invoke.i}), read {held.get(eid)!r}",
                        )
                    )
    return found


def ledgers_agree(ops: list[Operation], final: Final) -> list[Violation]:
    found = []
    closes: dict[int, list[Operation]] = defaultdict(list)
    for op in ops:
        if op.f == "ledger_close" and op.ok:
            closes[op.value["ledger_id"]].append(op)
    for lid_text, reads in final["ledgers"].items():
        lid = int(lid_text)
        seen: dict[str, tuple[str, int, list[Any]]] = {}
        for gateway in final["gateways"]:
            read = reads.get(gateway)
            if read is None or "error" in read:
                continue  # reported by ``acknowledged`` when it matters
            entries = [list(e) for e in read.get("entries") or []]
            seen[gateway] = (read["state"], read["last_entry_id"], entries)
            if read["state"] != "CLOSED":
                why = f"ledger {lid} is {read['state']} on {gateway}"
                found.append(Violation("agreement", why))
                continue
            ids = [eid for eid, _ in entries]
            if ids != list(range(read["last_entry_id"] + 1)):
                found.append(
                    Violation(
                        "agreement",
                        f"ledger {lid} on {gateway}: entries {_span(ids)} for last entry "
                        f"{read['last_entry_id']}",
                    )
                )
        if len({(s, last) for s, last, _ in seen.values()}) > 1:
            found.append(Violation("agreement", f"ledger {lid} ends differently: {_ends(seen)}"))
        elif len({repr(e) for _, _, e in seen.values()}) > 1:
            found.append(Violation("agreement", f"ledger {lid} reads differently by gateway"))
        ends = {last for _, last, _ in seen.values()}
        for op in closes[lid]:
            answered = op.result["last_entry_id"]
            if ends and ends != {answered}:
                found.append(
                    Violation(
                        "agreement",
                        f"ledger {lid}: close #{op.invoke.i} answered last entry "
                        f"{answered}, read back {sorted(ends)}",
                    )
                )
    return found


def _span(ids: list[int]) -> str:
    return f"{ids[:3]}…{ids[-3:]} ({len(ids)})" if len(ids) > 6 else str(ids)


def _ends(seen: dict[str, tuple[str, int, list[Any]]]) -> str:
    return ", ".join(f"{g}: {s} {last}" for g, (s, last, _) in sorted(seen.items()))


def phantom_entries(ops: list[Operation], final: Final) -> list[Violation]:
    sent: dict[int, set[str]] = defaultdict(set)
    for op in ops:
        if op.f == "ledger_add":
            sent[op.value["ledger_id"]].update(op.value["entries"])
    found = []
    for lid_text, reads in final["ledgers"].items():
        lid = int(lid_text)
        for gateway, read in sorted(reads.items()):
            for eid, data in read.get("entries") or []:
                if data not in sent[lid]:
                    found.append(
                        Violation(
                            "phantom", f"ledger {lid} entry {eid} on {gateway}: never sent {data!r}"
                        )
                    )
    sent_logs: dict[str, set[str]] = defaultdict(set)
    for op in ops:
        if op.f == "log_append":
            sent_logs[op.value["log"]].update(op.value["records"])
    for name, reads in final["logs"].items():
        for gateway, read in sorted(reads.items()):
            for lid, eid, data in read.get("records") or []:
                if data not in sent_logs[name]:
                    found.append(
                        Violation(
                            "phantom",
                            f"log {name} at {lid}:{eid} on {gateway}: never sent {data!r}",
                        )
                    )
    return found


# ---------------------------------------------------------------- logs


def _log_records(final: Final, name: str) -> list[tuple[int, int, str]] | None:
    """The log as the first gateway that read it whole reads it."""
    for gateway in final["gateways"]:
        read = final["logs"].get(name, {}).get(gateway)
        if read is not None and "error" not in read:
            return [(int(lid), int(eid), data) for lid, eid, data in read["records"]]
    return None


def logs_agree(ops: list[Operation], final: Final) -> list[Violation]:
    found = []
    for name, reads in final["logs"].items():
        seen = {}
        for gateway in final["gateways"]:
            read = reads.get(gateway)
            if read is None or "error" in read:
                why = read["error"] if read else "not read back"
                found.append(Violation("agreement", f"log {name} on {gateway}: {why}"))
                continue
            seen[gateway] = [tuple(r) for r in read["records"]]
        if len({repr(v) for v in seen.values()}) > 1:
            lengths = {g: len(v) for g, v in seen.items()}
            found.append(Violation("agreement", f"log {name} reads differently: {lengths}"))
    return found


def acknowledged_records(ops: list[Operation], final: Final) -> list[Violation]:
    found = []
    positions: dict[str, dict[tuple[int, int], str] | None] = {}  # each log's, made once
    for op in ops:
        if op.f != "log_append" or not op.ok:
            continue
        name = op.value["log"]
        if name not in positions:
            records = _log_records(final, name)
            positions[name] = (
                None if records is None else {(lid, eid): data for lid, eid, data in records}
            )
        at = positions[name]
        if at is None:
            continue  # reported by ``logs_agree``
        wanted = op.value["records"]
        for end, data in ((op.result["first"], wanted[0]), (op.result["last"], wanted[-1])):
            position = (int(end[0]), int(end[1]))
            if at.get(position) != data:
                found.append(
                    Violation(
                        "acknowledged",
                        f"log {name} at {position[0]}:{position[1]}: acknowledged {data!r} "
                        f"(key {op.value['key']}, #{op.invoke.i}), read {at.get(position)!r}",
                    )
                )
    return found


def exactly_once(ops: list[Operation], final: Final) -> list[Violation]:
    found = []
    by_log: dict[str, list[Operation]] = defaultdict(list)
    for op in ops:
        if op.f == "log_append":
            by_log[op.value["log"]].append(op)
    for name, appends in sorted(by_log.items()):
        records = _log_records(final, name)
        if records is None:
            continue
        counts = Counter(data for _, _, data in records)
        index = {data: i for i, (_, _, data) in enumerate(records)}
        keys: dict[str, list[Operation]] = defaultdict(list)
        for op in appends:
            keys[op.value["key"]].append(op)
        for key, attempts in sorted(keys.items()):
            for data in attempts[0].value["records"]:
                if counts[data] > 1:
                    found.append(
                        Violation("exactly_once", f"log {name} key {key}: {data!r} {counts[data]}x")
                    )
                elif counts[data] == 0 and any(a.ok for a in attempts):
                    found.append(
                        Violation("exactly_once", f"log {name} key {key}: acknowledged, missing")
                    )
        found += _acknowledgement_order(name, keys, index)
    return found


def _acknowledgement_order(
    name: str, keys: dict[str, list[Operation]], index: dict[str, int]
) -> list[Violation]:
    """A key acknowledged before another key was first sent precedes it in the log:
    a sweep over time, keeping the furthest log index acknowledged so far."""
    events: list[tuple[float, int, str, int]] = []  # (time, 0 ack / 1 first send, key, index)
    for key, attempts in keys.items():
        first = attempts[0].value["records"][0]
        if first not in index:
            continue
        events.append((attempts[0].invoke.t, 1, key, index[first]))
        acks = [a.completion.t for a in attempts if a.ok and a.completion is not None]
        if acks:
            events.append((min(acks), 0, key, index[first]))
    found = []
    furthest: tuple[int, str] = (-1, "")
    for _, kind, key, at in sorted(events):
        if kind == 0:
            furthest = max(furthest, (at, key))
        elif at < furthest[0]:
            found.append(
                Violation(
                    "exactly_once",
                    f"log {name}: key {furthest[1]} was acknowledged before key {key} was "
                    f"sent, yet {key} comes first ({at} < {furthest[0]})",
                )
            )
    return found


def one_writer(ops: list[Operation], final: Final) -> list[Violation]:
    found = []
    epochs: dict[tuple[str, int], set[str]] = defaultdict(set)
    for op in ops:
        if op.f == "log_writer" and op.ok:
            epochs[(op.value["log"], op.result["epoch"])].add(op.value["gateway"])
    for (name, epoch), gateways in sorted(epochs.items()):
        if len(gateways) > 1:
            found.append(
                Violation("one_writer", f"log {name} epoch {epoch} taken by {sorted(gateways)}")
            )
    gateways = set(final.get("addresses", {}).values())
    for op in ops:
        if op.f != "log_append" or not op.ok:
            continue
        lid = int(op.result["first"][0])
        metadata = final["metadata"].get(str(lid))
        if metadata is None:
            continue
        maker = metadata.get("metadata", {}).get(WRITER_KEY)
        if maker not in gateways:
            found.append(
                Violation(
                    "one_writer",
                    f"log {op.value['log']} key {op.value['key']} acknowledged in ledger {lid} "
                    f"made by {maker}, not a log writer of this cluster",
                )
            )
    return found


def readers_see_prefixes(ops: list[Operation], final: Final) -> list[Violation]:
    found = []
    cursors: dict[tuple[str, str], int] = defaultdict(int)
    logs: dict[str, list[tuple[int, int, str]] | None] = {}  # each log's records, made once
    entries: dict[tuple[int, str], dict[int, str]] = {}
    done = sorted(
        (op for op in ops if op.ok and op.f in ("log_read", "ledger_read")),
        key=lambda op: op.completion.t if op.completion is not None else 0.0,
    )
    for op in done:
        if op.f == "ledger_read":
            lid = op.value["ledger_id"]
            reads = _ledger_reads(final, lid)
            for gateway, read in sorted(reads.items()):
                if (lid, gateway) not in entries:
                    entries[(lid, gateway)] = _entries(read)
                held = entries[(lid, gateway)]
                for eid, data in op.result["entries"]:
                    if held.get(eid) != data:
                        found.append(
                            Violation(
                                "prefix",
                                f"{op.invoke.process} read ledger {lid} entry {eid} as "
                                f"{data!r} (#{op.invoke.i}); {gateway} holds {held.get(eid)!r}",
                            )
                        )
            continue
        name = op.value["log"]
        if name not in logs:
            logs[name] = _log_records(final, name)
        records = logs[name]
        if records is None:
            continue
        # a tailing reader goes on from its last read; a Spark read starts at ``start``
        if "start" in op.value:
            lid, eid = op.value["start"].split(":")
            cursor = bisect.bisect_left(records, (int(lid), int(eid)))
        else:
            cursor = cursors[(op.invoke.process, name)]
        got = [(int(lid), int(eid), data) for lid, eid, data in op.result["records"]]
        want = records[cursor : cursor + len(got)]
        if got != want:
            found.append(
                Violation(
                    "prefix",
                    f"{op.invoke.process} read log {name} from index {cursor} (#{op.invoke.i}): "
                    f"{got[:2]}… where the log holds {want[:2]}…",
                )
            )
        cursors[(op.invoke.process, name)] = cursor + len(got)
    return found


def positions_accepted(ops: list[Operation], final: Final) -> list[Violation]:
    found = []
    for op in ops:
        if op.f == "log_read" and op.outcome != OK and op.result.get("status") == 400:
            found.append(
                Violation(
                    "position",
                    f"{op.invoke.process} read log {op.value['log']} from "
                    f"{op.value.get('from')} through {op.value.get('gateway')} "
                    f"(#{op.invoke.i}): 400 {op.result.get('error')}",
                )
            )
    return found


# ---------------------------------------------------------------- replication


def replication(ops: list[Operation], final: Final) -> list[Violation]:
    state = final["replication"]
    if state["emptied_after_s"] is None:
        return [
            Violation(
                "replication",
                f"the under-replicated list did not empty within {state['bound_s']} s: "
                f"{state['remaining'][:20]}",
            )
        ]
    return []


def placement(ops: list[Operation], final: Final) -> list[Violation]:
    found = []
    for lid_text, metadata in sorted(final["metadata"].items(), key=lambda kv: int(kv[0])):
        if metadata.get("state") != "CLOSED" or metadata["last_entry_id"] < 0:
            continue
        stored = final["stored"].get(lid_text, {})
        fragments = metadata["fragments"]
        for n, fragment in enumerate(fragments):
            first = fragment["first_entry_id"]
            end = (
                fragments[n + 1]["first_entry_id"] - 1
                if n + 1 < len(fragments)
                else metadata["last_entry_id"]
            )
            missing: dict[str, list[int]] = defaultdict(list)
            for eid in range(first, end + 1):
                for index in write_set(eid, metadata["ensemble_size"], metadata["write_quorum"]):
                    bookie = fragment["bookies"][index]
                    if not _holds(stored.get(bookie), eid):
                        missing[bookie].append(eid)
            for bookie, eids in sorted(missing.items()):
                found.append(
                    Violation(
                        "placement",
                        f"ledger {lid_text} fragment {n} names {bookie}, which lacks "
                        f"entries {_span(eids)}",
                    )
                )
    return found


def _holds(ranges: list[list[int]] | None, eid: int) -> bool:
    return any(a <= eid <= b for a, b in ranges or [])


# ---------------------------------------------------------------- figures


def figures(records: Sequence[Record], final: Final | None = None) -> dict[str, Any]:
    """The run in numbers: faults by kind, operations by kind and outcome, unknown
    outcomes, the longest write stall per fault kind, time to full replication."""
    ops = operations(records)
    faults = Counter(r.f for r in records if r.type == FAULT)
    outcomes: dict[str, Counter[str]] = defaultdict(Counter)
    for op in ops:
        outcomes[op.f][op.outcome] += 1
    return {
        "faults": dict(sorted(faults.items())),
        "faults_total": sum(faults.values()),
        "operations": {f: dict(sorted(c.items())) for f, c in sorted(outcomes.items())},
        "operations_total": len(ops),
        "unknown": sum(c[UNKNOWN] for c in outcomes.values()),
        "max_stall_s": max_stalls(records),
        "full_replication_s": (final or {}).get("replication", {}).get("emptied_after_s"),
    }


def max_stalls(records: Sequence[Record]) -> dict[str, float]:
    """The longest gap between two acknowledged writes, by the fault kinds active
    during it (``none`` when no fault was); the gaps are from the first acknowledged
    write to the last."""
    acks = sorted(r.t for r in records if r.type == OK and r.f in WRITES)
    windows: list[tuple[float, float, str]] = []
    started: dict[int, Record] = {}
    for r in records:
        if r.type == FAULT:
            started[r.i] = r
        elif r.type == HEAL and r.ref in started:
            fault = started.pop(r.ref)
            windows.append((fault.t, r.t, fault.f))
    windows += [(f.t, float("inf"), f.f) for f in started.values()]
    stalls: dict[str, float] = {}
    for a, b in zip(acks, acks[1:], strict=False):
        kinds = {kind for start, end, kind in windows if start <= b and end >= a} or {"none"}
        for kind in kinds:
            stalls[kind] = max(stalls.get(kind, 0.0), round(b - a, 3))
    return dict(sorted(stalls.items()))
