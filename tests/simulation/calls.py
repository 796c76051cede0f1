"""Requests to the simulated bookies over the simulated network, as the gateway's
bookie client sends them (services/bookie_client), and the per-bookie add batching
the gateway shares between ledgers (services/ledger_client/senders.py).

Every bookie call has a time-out (``request_timeout_ms``): an answer that is dropped,
or a bookie that never answers, becomes a failure; an answer that comes after the
time-out is ignored, although the bookie may have done the work (unknown outcome).
Adds and fences may be delivered twice (a retry on a stale connection).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from services.bookie_client import BookieAddResult
from services.errors import BookieReadOnly, BookieUnavailable, QuireError
from services.ledger_client.senders import AddAnswer, answer_for
from services.wire.framing import FramedRecord
from tests.simulation.bookie import BookieDown, BookieReadOnlyError, SimBookie

if TYPE_CHECKING:
    from tests.simulation.scenario import Simulation

Done = Callable[[Any], None]


def bookie_call(
    world: Simulation,
    gateway: str,
    bookie_id: str,
    op: Callable[[SimBookie, Done], None],
    done: Done,
    *,
    duplicable: bool = False,
) -> None:
    """Send one request; ``op(bookie, reply)`` runs when it arrives and replies now or
    later (a queued write replies at its commit). ``done`` gets the first answer that
    comes back in time, else ``TimeoutError``."""
    sched, net, rng = world.scheduler, world.network, world.rng
    answered = False

    def answer(result: Any) -> None:
        nonlocal answered
        if not answered:
            answered = True
            done(result)

    sched.after(world.request_timeout_ms, lambda: answer(TimeoutError()))
    deliveries = 1
    if duplicable and world.faults.duplicate_p and rng.random() < world.faults.duplicate_p:
        deliveries = 2
        world.stats["request delivered twice"] += 1
    for n in range(deliveries):
        if not net.passes(gateway, bookie_id):
            continue  # this delivery is lost
        # A retry comes later, maybe after the caller gave up; the first delivery's
        # answer may be lost with its stale connection.
        late = n * rng.randint(1, 2 * world.request_timeout_ms)
        deaf = deliveries == 2 and n == 0 and rng.random() < 0.5

        def arrive(deaf: bool = deaf) -> None:
            def reply(result: Any) -> None:
                if not deaf and net.passes(gateway, bookie_id):
                    sched.after(net.delay(bookie_id), lambda: answer(result))

            try:
                op(world.bookies[bookie_id], reply)
            except (BookieDown, BookieReadOnlyError) as exc:
                reply(exc)

        sched.after(net.delay(bookie_id) + late, arrive)


def as_add_answer(result: Any) -> BookieAddResult | QuireError:
    """A bookie's answer to an add as the bookie client returns it."""
    if isinstance(result, BookieAddResult | QuireError):
        return result
    if isinstance(result, BookieReadOnlyError):
        return BookieReadOnly("the bookie is read-only")
    return BookieUnavailable("no answer")  # down, timed out


def failure_code(result: Any) -> str:
    if isinstance(result, BookieDown):
        return "bookie_unavailable"
    if isinstance(result, BookieReadOnlyError):
        return "bookie_read_only"
    return "timeout"


AddCallback = Callable[[AddAnswer], None]


class SharedSender:
    """One gateway's add queue to one bookie, shared by all its ledgers
    (services/ledger_client/senders.py): at most ``in_flight_max`` requests open, each
    taking what is queued up to ``entries_max`` records, records of many ledgers
    together; the loss, delay or failure of one request is every one of its ledgers'
    loss."""

    def __init__(
        self, world: Simulation, gateway: str, bookie: str, in_flight_max: int, entries_max: int
    ) -> None:
        self.world = world
        self.gateway = gateway
        self.bookie = bookie
        self.in_flight_max = in_flight_max
        self.entries_max = entries_max
        self.in_flight = 0
        self.queue: deque[tuple[tuple[FramedRecord, ...], AddCallback]] = deque()

    def send(self, records: tuple[FramedRecord, ...], callback: AddCallback) -> None:
        self.queue.append((records, callback))
        self._pump()

    def _pump(self) -> None:
        while self.queue and self.in_flight < self.in_flight_max:
            batch = [self.queue.popleft()]
            entries = len(batch[0][0])
            while self.queue and entries + len(self.queue[0][0]) <= self.entries_max:
                item = self.queue.popleft()
                batch.append(item)
                entries += len(item[0])
            self.in_flight += 1
            records = tuple(r for items, _ in batch for r in items)
            if len({r.ledger_id for r in records}) > 1:
                self.world.stats["request with several ledgers"] += 1

            def done(result: Any, batch: list = batch) -> None:
                self.in_flight -= 1
                answer = as_add_answer(result)
                for items, callback in batch:
                    callback(answer_for(items, answer))
                self._pump()

            bookie_call(
                self.world,
                self.gateway,
                self.bookie,
                lambda b, reply, rs=records: b.submit_add(rs, reply),
                done,
                duplicable=True,
            )
