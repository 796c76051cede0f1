"""One log simulation per seed: draw the plan, run gateways and clients with faults,
heal, let a last writer take the role (the client retries reach it), let a closer take
the role after it (fencing what is open), read the log and check it (``log_checker``).

Kinds of plan:
- ``race``: protocol.txt's second-to-last ledger race. Gateway A writes and rolls on
  demand while its clients keep adds in flight; around the roll B takes the role and
  A often crashes (before it closed its previous ledger, sometimes).
- ``duel``: 2-3 gateways take the role again and again at random times, each appending
  while it believes it is the writer, with rolls by entry count and on demand and
  gateway crashes (the actor stops mid-operation) and restarts.
Clients send to the gateway the log names as writer (sometimes to another one); a
keyed append whose answer was unknown, or refused, is retried with the same key.
"""

from __future__ import annotations

import random
from functools import partial

from services.errors import NotWriter, QuireError
from services.protocol import log_records
from services.protocol.log_append import UNKNOWN_OUTCOME
from services.protocol.logs import Position
from services.protocol.metadata import LedgerState
from tests.simulation.checker import Violation
from tests.simulation.log_checker import Append, LogChecker, payload
from tests.simulation.log_gateway import AppendResult, LogGateway
from tests.simulation.logs import Fut, LogPlan, LogWorld, bare_config
from tests.simulation.plan import Config
from tests.simulation.world import Faults

HEAL_TO_FINAL_MS = 200
FINAL_MS_MAX = 30_000  # after healing: every retry answered, the closer in place
RETRIES_MAX = 12
OUTSTANDING_MAX = 3


def draw(seed: int, kind: str, fence_last_only: bool = False) -> tuple[Config, LogPlan]:
    rng = random.Random(seed * 7919 + (11 if kind == "race" else 13))
    count = rng.randint(3, 5)
    shapes = [s for s in [(3, 2, 2), (3, 3, 2), (2, 2, 2), (4, 3, 2), (3, 3, 3)] if s[0] <= count]
    calm = rng.random() < 0.15
    faults = Faults(
        delay_max_ms=rng.randint(1, 20),
        drop_p=0.0 if calm else rng.choice([0.0, 0.005, 0.02]),
        metadata_fail_p=0.0 if calm else rng.choice([0.0, 0.03, 0.1]),
        duplicate_p=0.0 if calm else rng.choice([0.0, 0.02]),
        late_cas_p=0.0 if calm else rng.choice([0.0, 0.0, 0.05]),
        stale_read_ms=0 if calm else rng.choice([0, 100]),
    )
    config = bare_config(seed, rng, faults, count)
    phase1 = 3_000
    for _ in range(0 if calm else rng.randint(0, 2)):
        down = rng.randint(0, phase1)
        config.crashes.append((rng.choice(config.bookies), down, down + rng.randint(20, 1_500)))
    plan = LogPlan(
        seed=seed, shape=rng.choice(shapes), gateways=2, clients=rng.randint(1, 3),
        appends_per_client=rng.randint(10, 40), keyed_p=rng.choice([0.0, 0.5, 1.0]),
        batch_max=rng.choice([1, 1, 3]), interarrival_max_ms=rng.randint(2, 30),
        roll_entries=10**9, settle_timeout_ms=rng.choice([300, 1_000, 3_000]),
        add_timeout_ms=rng.choice([500, 1_500]), acquires=[(0, 1)], rolls=[],
        gateway_crashes=[], fence_last_only=fence_last_only, phase1_ms=phase1,
    )  # fmt: skip
    if kind == "race":
        roll_at = rng.randint(150, 1_500)
        plan.rolls = [(0, roll_at)]
        if rng.random() < 0.5:
            plan.rolls.append((0, roll_at + rng.randint(0, 200)))
        plan.acquires.append((1, roll_at + rng.randint(0, 200)))
        if rng.random() < 0.8:
            down = roll_at + rng.randint(0, 150)
            plan.gateway_crashes.append((0, down, down + rng.randint(100, 2_000)))
    else:
        plan.gateways = rng.randint(2, 3)
        plan.roll_entries = rng.choice([5, 15, 40, 10**9])
        for _ in range(rng.randint(2, 8)):
            plan.acquires.append((rng.randrange(plan.gateways), rng.randint(1, phase1)))
        for _ in range(rng.randint(0, 4)):
            plan.rolls.append((rng.randrange(plan.gateways), rng.randint(1, phase1)))
        for _ in range(rng.randint(0, 2)):
            down = rng.randint(1, phase1)
            plan.gateway_crashes.append(
                (rng.randrange(plan.gateways), down, down + rng.randint(50, 1_500))
            )
    return config, plan


class LogClient:
    """An application appending: at most ``OUTSTANDING_MAX`` appends in flight, each
    to the gateway the log names as writer (sometimes, a stale belief, another)."""

    def __init__(self, world: LogWorld, index: int) -> None:
        self.world = world
        self.index = index
        self.rng = random.Random(world.config.seed * 977 + index)
        self.sent = 0
        self.outstanding = 0

    def start(self) -> None:
        self.world.scheduler.after(self.rng.randint(1, 20), self._next)

    def _next(self) -> None:
        world, plan = self.world, self.world.plan
        if self.sent >= plan.appends_per_client or world.scheduler.now > plan.phase1_ms:
            return
        if self.outstanding < OUTSTANDING_MAX:
            checker = world.log_checker
            append_id = len(checker.appends)
            count = self.rng.randint(1, plan.batch_max)
            keyed = self.rng.random() < plan.keyed_p
            append = Append(
                append_id, self.index, f"k{append_id}" if keyed else None,
                tuple(payload(append_id, i) for i in range(count)), world.scheduler.now,
            )  # fmt: skip
            checker.appends[append_id] = append
            self.sent += 1
            self.outstanding += 1
            self._send(append)
        world.scheduler.after(self.rng.randint(1, plan.interarrival_max_ms), self._next)

    def _target(self) -> LogGateway | None:
        gateways = self.world.gateways
        writer = self.world.log_cell.log.writer
        named = [g for g in gateways if writer is not None and g.name == writer.gateway]
        if named and self.rng.random() < 0.85:
            return named[0]
        return self.rng.choice(gateways[: self.world.plan.gateways])

    def _send(self, append: Append) -> None:
        world = self.world
        gateway = self._target()
        if gateway is None or not gateway.up:
            world.scheduler.after(world.network.delay(), lambda: self._answer(append, "failed"))
            return
        answered = False

        def reply(code: str) -> None:
            nonlocal answered
            if not answered:
                answered = True
                self._answer(append, code)

        fut: Fut = gateway.append(append.payloads, append.key)

        def done() -> None:
            result = fut.value
            if isinstance(result, AppendResult):
                span = (result.first, result.last)
                world.log_checker.on_gateway_ack(
                    append, gateway.name, result.epoch, span, result.deduplicated
                )
                if not answered:
                    world.log_checker.on_client_ack(append, *span, world.scheduler.now)
                reply("acked")
            elif isinstance(fut.error, NotWriter):
                reply("not_writer")
            elif isinstance(fut.error, UNKNOWN_OUTCOME):
                reply("unknown")
            else:
                reply("failed")

        fut.then(lambda: world.scheduler.after(world.network.delay(), done))
        world.scheduler.after(world.plan.client_timeout_ms, lambda: reply("unknown"))

    def _answer(self, append: Append, code: str) -> None:
        append.answers.append(code)
        retry = append.key is not None and code != "acked" and len(append.answers) < RETRIES_MAX
        if retry:
            self.world.stats["keyed retry"] += 1
            self.world.scheduler.after(self.rng.randint(50, 300), lambda: self._send(append))
            return
        append.done = True
        self.outstanding -= 1


def run(config: Config, plan: LogPlan) -> LogWorld:
    """Run one plan; ``Violation`` (with the plan and the replay command) when an
    invariant breaks."""
    world = LogWorld(config, plan)
    world.log_checker = LogChecker(world)
    try:
        _run(world)
    except Violation as exc:
        raise Violation(
            f"{exc}\n  {config.describe()}\n  {plan.describe()}\n  replay: pytest "
            f"tests/simulation/test_log_simulation.py --sim-seed={config.seed}"
        ) from exc
    return world


def _run(world: LogWorld) -> None:
    plan, at = world.plan, world.scheduler.at
    world.gateways = [LogGateway(world, f"gw{i}", plan.fence_last_only)
                      for i in range(plan.gateways)]  # fmt: skip
    for index, when in plan.acquires:
        at(when, partial(_acquire, world.gateways[index]))
    for index, when in plan.rolls:
        at(when, world.gateways[index].roll_on_demand)
    for index, down, up in plan.gateway_crashes:
        at(down, world.gateways[index].crash)
        at(up, world.gateways[index].restart)
    for bookie, down, up in world.config.crashes:
        at(down, partial(world._crash, bookie))
        at(up, partial(world._restart, bookie))
    clients = [LogClient(world, i) for i in range(plan.clients)]
    for client in clients:
        client.start()
    world.step_until(end_ms=plan.phase1_ms)
    world.heal()
    for gateway in world.gateways:
        gateway.restart()
    final = _take_role(world, "gw-final", HEAL_TO_FINAL_MS)
    deadline = world.scheduler.now + FINAL_MS_MAX
    world.step_until(lambda: world.scheduler.now > deadline or (final.done and all(
        a.done for a in world.log_checker.appends.values())))  # fmt: skip
    if not final.done or final.error is not None:
        raise Violation(f"liveness: the last writer never took the role ({final.error})")
    unanswered = [a.append_id for a in world.log_checker.appends.values() if not a.done]
    if unanswered:
        raise Violation(f"liveness: appends {unanswered} still unanswered after healing")
    closer = _take_role(world, "gw-closer", 1)
    world.step_until(lambda: closer.done)
    if closer.error is not None:
        raise Violation(f"liveness: the closer could not take the role ({closer.error})")
    records = read_log(world)
    world.stats["records in the final log"] += len(records)
    world.stats["appends acknowledged"] += sum(
        1 for a in world.log_checker.appends.values() if a.acked is not None
    )
    world.stats["appends"] += len(world.log_checker.appends)
    world.log_checker.final(records)


def _acquire(gateway: LogGateway) -> None:
    gateway.acquire()


def _take_role(world: LogWorld, name: str, after_ms: int) -> Fut:
    """A gateway that takes the role (retrying a failed attempt a few times)."""
    gateway = LogGateway(world, name, world.plan.fence_last_only)
    world.gateways.append(gateway)
    result = world.fut()

    def attempt(left: int) -> None:
        fut = gateway.acquire()

        def done() -> None:
            if fut.error is None or left == 0:
                result.resolve(fut.value, fut.error)
            else:
                world.scheduler.after(200, lambda: attempt(left - 1))

        fut.then(done)

    world.scheduler.after(after_ms, lambda: attempt(10))
    return result


def read_log(world: LogWorld) -> list[tuple[Position, bytes]]:
    """The log as gateway/logs/reads.py reads it, from the bookies' storage: CLOSED
    ledgers to their last entry, an OPEN one to the bookies' LAC and no further, whole
    batches only."""
    out: list[tuple[Position, bytes]] = []
    for lid in world.log_cell.log.ledgers:
        ledger = world.ledger(lid)
        md = ledger.cell.metadata
        closed = md.state is LedgerState.CLOSED
        end = (md.last_entry_id if md.last_entry_id is not None else -1) if closed else (
            world.bookies_lac(ledger))  # fmt: skip
        for entry_id, data in enumerate(world.stored(ledger, 0, end)):
            if data is None:
                raise Violation(f"ledger {lid}: entry {entry_id} (of 0..{end}) has no copy")
            if not log_records.visible(entry_id, log_records.decode(data), end):
                break
            out.append((Position(lid, entry_id), data))
        if not closed:
            if lid != world.log_cell.log.ledgers[-1]:
                world.stats["final read stopped at an OPEN ledger"] += 1
            break
    return out


def run_seed(seed: int, kind: str, fence_last_only: bool = False) -> LogWorld:
    return run(*draw(seed, kind, fence_last_only))


__all__ = ["QuireError", "run", "run_seed", "draw", "read_log"]
