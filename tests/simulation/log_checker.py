"""The invariants of a log (docs/protocol.md "Ledgers to logs", docs/api.md's log appends),
checked while the log simulation runs and on the log read at its end.

While running:
- one writer per epoch: an epoch is acquired once, by one gateway; every ledger the
  list gains is put there by the CAS of the writer it names, at that writer's epoch;
  an acknowledged append lies in ONE ledger, put in the list by the epoch and gateway
  that acknowledged it (never two writers acknowledged in one epoch);
- the list only grows at its end (nothing truncates here) and the epoch never falls;
- an append acknowledged twice (a retry answered from the dedup window) has the same
  positions both times.

On the final log (read as gateway/logs/reads.py reads: ledgers in list order, CLOSED
ones up to their last entry, an OPEN one up to the bookies' LAC and no further, only
whole batches (``log_records.visible``)):
- every acknowledged append is in it exactly once, at the positions it was answered;
- no record is in it twice, no idempotency key heads two appends;
- an append whose every answer said it is not in the log (``not_writer`` or another
  definite failure) is not in it;
- linearizable appends: an append acknowledged before another was first sent comes
  before it; the ledgers' epochs never fall along the list (each epoch's records come
  after all earlier epochs' records);
- every entry carries a stamp, and the stamps never go backwards in log order
  (services/protocol/log_append.py "Stamps"; a read from a time relies on it).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from services.protocol import log_records
from services.protocol import log_writer as lw
from services.protocol.logs import LogMetadata, Position
from services.protocol.metadata import LedgerState
from tests.simulation.checker import Violation

if TYPE_CHECKING:
    from tests.simulation.logs import LogWorld


@dataclass
class Append:
    """One append of a client, with all its attempts (a keyed append's retries)."""

    append_id: int
    client: int
    key: str | None
    payloads: tuple[bytes, ...]
    first_sent: int
    answers: list[str] = field(default_factory=list)  # acked | not_writer | failed | unknown
    acked: tuple[Position, Position] | None = None
    acked_at: int | None = None
    answered: tuple[Position, Position] | None = None  # by a gateway (maybe too late)
    done: bool = False  # no more attempts

    @property
    def maybe_in_log(self) -> bool:
        return any(a in ("acked", "unknown") for a in self.answers)


def payload(append_id: int, index: int) -> bytes:
    return f"a{append_id}.{index}".encode()


def parse(data: bytes) -> tuple[int, int]:
    append_id, index = data.decode()[1:].split(".")
    return int(append_id), int(index)


class LogChecker:
    def __init__(self, world: LogWorld) -> None:
        self.world = world
        self.appends: dict[int, Append] = {}
        self.ledger_epoch: dict[int, tuple[str, int]] = {}  # listed by (gateway, epoch)
        self.epochs: dict[int, str] = {}  # acquired epoch -> gateway
        self.acquired_at: dict[int, int] = {}
        self._log: LogMetadata = world.log_cell.log
        self.final_records: list[tuple[Position, bytes]] = []

    def fail(self, message: str) -> None:
        raise Violation(f"t={self.world.scheduler.now}ms, log: {message}")

    # ------------------------------------------------------------ while running

    def on_log_written(self, gateway: str, log: LogMetadata, version: int) -> None:
        prev, self._log = self._log, log
        if log.ledgers[: len(prev.ledgers)] != prev.ledgers:
            self.fail(f"{gateway}'s CAS changed the list's past: {prev.ledgers} -> {log.ledgers}")
        if log.epoch < prev.epoch:
            self.fail(f"{gateway}'s CAS lowered the epoch {prev.epoch} -> {log.epoch}")
        added = log.ledgers[len(prev.ledgers) :]
        if added and (log.writer is None or log.writer.gateway != gateway):
            self.fail(f"{gateway} listed {added} for writer {log.writer}")
        for lid in added:
            if self.world.ledger_owner.get(lid) != gateway:
                self.fail(f"{gateway} listed ledger {lid} created by another gateway")
            writer = log.writer
            assert writer is not None
            self.ledger_epoch[lid] = (writer.gateway, writer.epoch)
        if log.epoch > prev.epoch:
            # A hand-over: the ledgers behind the new writer's should all be CLOSED (or
            # be closed by their writer soon, which a crash may prevent).
            for lid in log.ledgers[:-1]:
                if self.world.ledger(lid).cell.metadata.state is not LedgerState.CLOSED:
                    self.world.stats["ledger not CLOSED behind a new writer"] += 1

    def on_acquired(self, gateway: str, acquired: lw.Acquired, now: int) -> None:
        epoch = acquired.epoch
        if epoch in self.epochs:
            self.fail(f"epoch {epoch} acquired by {self.epochs[epoch]} and by {gateway}")
        self.epochs[epoch] = gateway
        self.acquired_at[epoch] = now
        if self.ledger_epoch.get(acquired.ledger_id) != (gateway, epoch):
            self.fail(
                f"{gateway} acquired epoch {epoch} on ledger {acquired.ledger_id}, listed by "
                f"{self.ledger_epoch.get(acquired.ledger_id)}"
            )

    def on_gateway_ack(
        self,
        append: Append,
        gateway: str,
        epoch: int,
        span: tuple[Position, Position],
        deduplicated: bool,
    ) -> None:
        """A gateway answered an append with positions: fresh ones, in a ledger of its
        own epoch, or (``deduplicated``) the ones its window remembers."""
        first, last = span
        count = last.entry_id - first.entry_id + 1
        if first.ledger_id != last.ledger_id or count != len(append.payloads):
            self.fail(f"append {append.append_id} answered {first}..{last}")
        listed_by = self.ledger_epoch.get(first.ledger_id)
        if listed_by is None:
            self.fail(f"{gateway} acknowledged append {append.append_id} in unlisted {first}")
        if not deduplicated and listed_by != (gateway, epoch):
            self.fail(
                f"{gateway} at epoch {epoch} acknowledged append {append.append_id} at "
                f"{first}..{last}, in a ledger listed by {listed_by} (two writers "
                "acknowledged in one epoch)"
            )
        if append.answered is not None and append.answered != span:
            self.fail(
                f"append {append.append_id} (key {append.key}) acknowledged at "
                f"{append.answered[0]}..{append.answered[1]} and at {first}..{last}"
            )
        append.answered = span

    def on_client_ack(self, append: Append, first: Position, last: Position, now: int) -> None:
        if append.acked is None:
            append.acked, append.acked_at = (first, last), now

    # ------------------------------------------------------------ the end

    def final(self, records: list[tuple[Position, bytes]]) -> None:
        self.final_records = records
        where: dict[bytes, Position] = {}
        keys: Counter[str] = Counter()
        stamp, stamp_at = -1, None
        for position, data in records:
            record = log_records.decode(data)
            if record.time_ms is None or record.time_ms < stamp:
                self.fail(f"record at {position} stamped {record.time_ms}, after one stamped "
                          f"{stamp} at {stamp_at}: stamps go backwards")  # fmt: skip
            if record.time_ms is not None:
                stamp, stamp_at = record.time_ms, position
            if record.data in where:
                self.fail(f"record {record.data!r} twice in the log: {where[record.data]} and "
                          f"{position}")  # fmt: skip
            where[record.data] = position
            if record.head is not None and record.head.key is not None:
                keys[record.head.key] += 1
        for key, count in keys.items():
            if count > 1:
                self.fail(f"idempotency key {key} heads {count} appends in the log")
        for append in self.appends.values():
            found = [where.get(p) for p in append.payloads]
            if append.acked is not None:
                first, last = append.acked
                expected = [
                    Position(first.ledger_id, e) for e in range(first.entry_id, last.entry_id + 1)
                ]
                if found != expected:
                    self.fail(
                        f"acknowledged append {append.append_id} (key {append.key}, answers "
                        f"{append.answers}) at {first}..{last} is in the log at {found}"
                    )  # fmt: skip
            elif not append.maybe_in_log and any(p is not None for p in found):
                self.fail(
                    f"append {append.append_id} answered {append.answers} is in the log at {found}"
                )
        self._linearizable()
        self._epochs_ordered()

    def _linearizable(self) -> None:
        acked = sorted(
            (a for a in self.appends.values() if a.acked is not None),
            key=lambda a: a.acked[0] if a.acked else Position(0, 0),
        )
        ledger_index = {lid: i for i, lid in enumerate(self.world.log_cell.log.ledgers)}

        def order(a: Append) -> tuple[int, int]:
            assert a.acked is not None
            return ledger_index[a.acked[0].ledger_id], a.acked[0].entry_id

        acked.sort(key=order)
        latest_ack_after = 10**12  # the earliest ack among appends later in the log
        for append in reversed(acked):
            if latest_ack_after < append.first_sent:
                self.fail(
                    f"not linearizable: append {append.append_id} at {append.acked} was sent "
                    f"at {append.first_sent}, after an append later in the log was "
                    f"acknowledged (at {latest_ack_after})"
                )
            latest_ack_after = min(latest_ack_after, append.acked_at or 10**12)

    def _epochs_ordered(self) -> None:
        epochs = [self.ledger_epoch[lid][1] for lid in self.world.log_cell.log.ledgers]
        if epochs != sorted(epochs):
            self.fail(f"the list's ledgers' epochs fall: {epochs}")
