"""The chaos run's faults: a seeded schedule, planned before the run, and the nemesis
that carries it out on a layout of hosts (tests/multihost/layout.py).

A fault kind is one small class: ``plan`` draws one fault of its kind from the hosts
still free at a time (or None), ``apply`` does it and ``heal`` undoes it. The planner
(``plan_schedule``) is pure and seeded: the same seed, length and layout give the same
faults at the same offsets. It keeps progress possible: at most a minority of the
bookies and of the ZooKeeper servers, and all but one of each other service, are
impaired at once (down, paused or cut off on one side of a partition); a host has one
fault at a time, and stays taken for a while after its heal (``settle_s``: a restarted
process needs time to come back); one partition at a time (``Network.heal`` heals them
all). Every fault ends before the run does.

Kinds here: ``kill`` (SIGKILL, restarted at the heal), ``pause`` (SIGSTOP, SIGCONT at
the heal), ``restart`` (SIGTERM, then started again), ``partition`` and
``partition_one_way`` between two host sets, ``zookeeper_leader_kill`` (the leader of
the moment, found when the fault starts), ``disk_full`` (a bookie's disk filled, freed
at the heal), ``rack_loss`` (every bookie of one rack killed, started at the heal) and
``wipe`` (a bookie's data dir emptied; at the heal it is formatted and started as a new
instance). A wipe is the one fault that loses data: only ``kinds(wipes=True)`` has it,
for runs whose every ledger has Qa >= 2 (an entry acknowledged by one bookie is lost
with that bookie's disk: the guarantee is Qa - 1 disks), and two wipes are
``WIPE_SPACING_S`` apart, time for the repairs to restore what the first took.

The nemesis runs each fault in a thread of its own (a graceful stop may take seconds;
faults of disjoint hosts do not wait for one another) and logs every fault and heal,
with its time and what it touched, into the history.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from services.cluster.processes import ManagedProcess
from tests.chaos.history import History
from tests.multihost import faults as disks
from tests.multihost.layout import HostService, Layout

ZOOKEEPER, BOOKIE, GATEWAY, AUDITOR, REPLICATOR, CLIENT = (
    "zookeeper",
    "bookie",
    "gateway",
    "auditor",
    "replicator",
    "client",
)
# Faults start no earlier than this into the run (the workload gets going first).
FIRST_FAULT_S = 2.0
# How long a host stays taken after its fault healed, by what the heal does.
SETTLE_RESTART_S = {ZOOKEEPER: 8.0, BOOKIE: 4.0, GATEWAY: 4.0, AUDITOR: 3.0, REPLICATOR: 3.0}
SETTLE_RESUME_S = 1.5
SETTLE_PARTITION_S = 2.0
# A freed disk: the bookie's next disk check (1 s) makes it writable, then registers so.
SETTLE_DISK_S = 3.0
LEADER_WAIT_S = 5.0
# From one wipe's heal to the next wipe: time for the auditor to mark what the wiped
# bookie lost (it does so as soon as the new instance registers).
WIPE_SPACING_S = 90.0
# A wipe also waits, at most this long, until no under-replicated mark names a bookie
# wiped before (its share is restored: a 30-minute run's bookie holds thousands of
# ledgers, whose refill can take minutes); past it the wipe is skipped and says so.
WIPE_WAIT_S = 120.0
WIPE_POLL_S = 1.0
MARKS_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Roles:
    """The hosts of a layout by role (the client's host has the role ``client``)."""

    hosts: Mapping[str, tuple[str, ...]]
    # The bookie hosts of each rack (a layout whose bookies have racks).
    racks: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, layout: Layout) -> Roles:
        racks: dict[str, list[str]] = {}
        for host, rack in layout.racks.items():
            racks.setdefault(rack, []).append(host)
        return cls(
            {
                ZOOKEEPER: tuple(z.node.name for z in layout.zookeepers),
                BOOKIE: tuple(b.node.name for b in layout.bookies),
                GATEWAY: tuple(g.node.name for g in layout.gateways),
                AUDITOR: tuple(a.node.name for a in layout.auditors),
                REPLICATOR: tuple(r.node.name for r in layout.replicators),
                CLIENT: (layout.client.name,),
            },
            {rack: tuple(sorted(hosts)) for rack, hosts in sorted(racks.items())},
        )

    def role_of(self, host: str) -> str:
        return next(role for role, hosts in self.hosts.items() if host in hosts)

    def budget(self, role: str) -> int:
        """How many hosts of ``role`` may be impaired at once."""
        count = len(self.hosts.get(role, ()))
        if role in (ZOOKEEPER, BOOKIE):
            return (count - 1) // 2
        return 0 if role == CLIENT else max(0, count - 1)

    @property
    def services(self) -> list[str]:
        return [h for role, hosts in self.hosts.items() if role != CLIENT for h in hosts]


@dataclass(frozen=True)
class Fault:
    """One planned fault: its kind, when it starts and how long it lasts, the hosts it
    acts on (a partition: one side; a leader kill: every ZooKeeper server, one of which
    it kills) and a partition's other side."""

    kind: str
    at_s: float
    duration_s: float
    hosts: tuple[str, ...]
    others: tuple[str, ...] = ()

    @property
    def end_s(self) -> float:
        return self.at_s + self.duration_s

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"at_s": round(self.at_s, 3), "duration_s": round(self.duration_s, 3)}
        doc["hosts"] = list(self.hosts)
        if self.others:
            doc["others"] = list(self.others)
        return doc


@dataclass
class Free:
    """What a kind may use at a time: the hosts with no fault, the impairments each
    role can still take, and whether a partition is on."""

    hosts: dict[str, list[str]]
    room: Counter[str]
    partition_on: bool

    def usable(self, role: str) -> list[str]:
        return self.hosts.get(role, []) if self.room[role] > 0 else []


class Cluster(Protocol):
    """What faults act on (``LayoutCluster`` in a run, fakes in unit tests)."""

    def process(self, host: str) -> ManagedProcess: ...

    def zookeeper_leader(self) -> str: ...

    def partition(self, a: Sequence[str], b: Sequence[str], one_way: bool) -> None: ...

    def heal_partitions(self) -> None: ...

    def fill_disk(self, host: str) -> None: ...

    def free_disk(self, host: str) -> None: ...

    def lose_disk(self, host: str) -> None: ...

    def format_and_start(self, host: str) -> None: ...

    def marks_name(self, hosts: Collection[str]) -> bool | None:
        """Whether an under-replicated mark names a bookie of ``hosts`` (None: no gateway
        answered)."""
        ...


class FaultKind(Protocol):
    name: str
    weight: float
    # The least time from the end of one fault of this kind to the start of the next.
    spacing_s: float

    def plan(self, rng: random.Random, at_s: float, free: Free, roles: Roles) -> Fault | None: ...

    def impairs(self, fault: Fault, roles: Roles) -> Counter[str]:
        """The impairments by role the fault costs while it lasts."""
        ...

    def settle_s(self, fault: Fault, roles: Roles) -> float: ...

    def apply(self, cluster: Cluster, fault: Fault) -> dict[str, Any]: ...

    def heal(self, cluster: Cluster, fault: Fault, applied: dict[str, Any]) -> dict[str, Any]: ...


def _pick_process_host(rng: random.Random, free: Free, roles: Roles) -> str | None:
    choices = [h for role in roles.hosts if role != CLIENT for h in free.usable(role)]
    return rng.choice(choices) if choices else None


class _ProcessFault:
    """A fault of one process, chosen among the free hosts of every service."""

    name = ""
    weight = 1.0
    spacing_s = 0.0
    duration_range_s = (0.5, 3.0)

    def plan(self, rng: random.Random, at_s: float, free: Free, roles: Roles) -> Fault | None:
        host = _pick_process_host(rng, free, roles)
        if host is None:
            return None
        return Fault(self.name, at_s, rng.uniform(*self.duration_range_s), (host,))

    def impairs(self, fault: Fault, roles: Roles) -> Counter[str]:
        return Counter(roles.role_of(h) for h in fault.hosts)

    def settle_s(self, fault: Fault, roles: Roles) -> float:
        return max(SETTLE_RESTART_S[roles.role_of(h)] for h in fault.hosts)


class Kill(_ProcessFault):
    """SIGKILL a process; the heal starts it again on the same data."""

    name = "kill"
    weight = 3.0
    duration_range_s = (0.5, 4.0)

    def apply(self, cluster: Cluster, fault: Fault) -> dict[str, Any]:
        proc = cluster.process(fault.hosts[0])
        pid = proc.pid
        proc.kill()
        return {"pid": pid}

    def heal(self, cluster: Cluster, fault: Fault, applied: dict[str, Any]) -> dict[str, Any]:
        proc = cluster.process(fault.hosts[0])
        proc.start()
        return {"pid": proc.pid}


class Restart(_ProcessFault):
    """Stop a process gracefully (SIGTERM: a gateway drains its streams) and start it
    again at the heal."""

    name = "restart"
    weight = 1.0
    duration_range_s = (0.2, 1.5)

    def apply(self, cluster: Cluster, fault: Fault) -> dict[str, Any]:
        proc = cluster.process(fault.hosts[0])
        pid = proc.pid
        return {"pid": pid, "exit": proc.stop()}

    def heal(self, cluster: Cluster, fault: Fault, applied: dict[str, Any]) -> dict[str, Any]:
        proc = cluster.process(fault.hosts[0])
        proc.start()
        return {"pid": proc.pid}


class Pause(_ProcessFault):
    """SIGSTOP a process (a hung process: connections open, nothing answered); SIGCONT
    at the heal."""

    name = "pause"
    weight = 2.0
    duration_range_s = (0.5, 3.0)

    def settle_s(self, fault: Fault, roles: Roles) -> float:
        return SETTLE_RESUME_S

    def apply(self, cluster: Cluster, fault: Fault) -> dict[str, Any]:
        proc = cluster.process(fault.hosts[0])
        proc.pause()
        return {"pid": proc.pid}

    def heal(self, cluster: Cluster, fault: Fault, applied: dict[str, Any]) -> dict[str, Any]:
        cluster.process(fault.hosts[0]).resume()
        return {}


class ZooKeeperLeaderKill:
    """SIGKILL the ZooKeeper leader of the moment (an election follows); the heal starts
    it again. Planned only while no ZooKeeper server has a fault: it takes them all, as
    which one it kills is known only when it starts."""

    name = "zookeeper_leader_kill"
    weight = 1.0
    spacing_s = 0.0

    def plan(self, rng: random.Random, at_s: float, free: Free, roles: Roles) -> Fault | None:
        servers = roles.hosts[ZOOKEEPER]
        if free.room[ZOOKEEPER] < 1 or sorted(free.hosts.get(ZOOKEEPER, [])) != sorted(servers):
            return None
        return Fault(self.name, at_s, rng.uniform(1.0, 4.0), tuple(servers))

    def impairs(self, fault: Fault, roles: Roles) -> Counter[str]:
        return Counter({ZOOKEEPER: 1})

    def settle_s(self, fault: Fault, roles: Roles) -> float:
        return SETTLE_RESTART_S[ZOOKEEPER]

    def apply(self, cluster: Cluster, fault: Fault) -> dict[str, Any]:
        leader = cluster.zookeeper_leader()
        proc = cluster.process(leader)
        pid = proc.pid
        proc.kill()
        return {"leader": leader, "pid": pid}

    def heal(self, cluster: Cluster, fault: Fault, applied: dict[str, Any]) -> dict[str, Any]:
        proc = cluster.process(applied["leader"])
        proc.start()
        return {"leader": applied["leader"], "pid": proc.pid}


class Partition:
    """Cut one or two hosts (side a) from a random set of the others, the client's host
    among them (side b): both ways, or only b's packets to a (``one_way``)."""

    weight = 2.0
    spacing_s = 0.0

    def __init__(self, one_way: bool):
        self.one_way = one_way
        self.name = "partition_one_way" if one_way else "partition"

    def plan(self, rng: random.Random, at_s: float, free: Free, roles: Roles) -> Fault | None:
        if free.partition_on:
            return None
        side: list[str] = []
        room = Counter(free.room)
        for _ in range(rng.choice((1, 1, 2))):
            choices = [
                h
                for role in roles.hosts
                if role != CLIENT and room[role] > 0
                for h in free.hosts.get(role, [])
                if h not in side
            ]
            if not choices:
                break
            host = rng.choice(choices)
            side.append(host)
            room[roles.role_of(host)] -= 1
        if not side:
            return None
        rest = [h for hosts in roles.hosts.values() for h in hosts if h not in side]
        others = sorted(rng.sample(rest, rng.randint(1, len(rest))))
        return Fault(self.name, at_s, rng.uniform(1.0, 5.0), tuple(side), tuple(others))

    def impairs(self, fault: Fault, roles: Roles) -> Counter[str]:
        return Counter(roles.role_of(h) for h in fault.hosts)

    def settle_s(self, fault: Fault, roles: Roles) -> float:
        return SETTLE_PARTITION_S

    def apply(self, cluster: Cluster, fault: Fault) -> dict[str, Any]:
        # one way: b's packets to a are dropped, a still reaches b
        cluster.partition(fault.others, fault.hosts, self.one_way)
        return {}

    def heal(self, cluster: Cluster, fault: Fault, applied: dict[str, Any]) -> dict[str, Any]:
        cluster.heal_partitions()
        return {}


class _BookieFault:
    """A fault of one bookie's disk, chosen among the free bookies."""

    name = ""
    weight = 1.0
    spacing_s = 0.0
    duration_range_s = (1.0, 6.0)

    def plan(self, rng: random.Random, at_s: float, free: Free, roles: Roles) -> Fault | None:
        bookies = free.usable(BOOKIE)
        if not bookies:
            return None
        return Fault(self.name, at_s, rng.uniform(*self.duration_range_s), (rng.choice(bookies),))

    def impairs(self, fault: Fault, roles: Roles) -> Counter[str]:
        return Counter({BOOKIE: 1})


class DiskFull(_BookieFault):
    """A bookie's disk filled to the last block (the bookie turns read-only, writers
    move on); freed at the heal, when the bookie becomes writable again."""

    name = "disk_full"

    def settle_s(self, fault: Fault, roles: Roles) -> float:
        return SETTLE_DISK_S

    def apply(self, cluster: Cluster, fault: Fault) -> dict[str, Any]:
        cluster.fill_disk(fault.hosts[0])
        return {}

    def heal(self, cluster: Cluster, fault: Fault, applied: dict[str, Any]) -> dict[str, Any]:
        cluster.free_disk(fault.hosts[0])
        return {}


class RackLoss:
    """Every bookie of one rack killed at once (a rack's power or switch gone), for
    longer than the lost-bookie delay of a chaos run, so repairs start; started again
    at the heal. Planned only when the whole rack is free and fits the bookies'
    budget."""

    name = "rack_loss"
    weight = 0.5
    spacing_s = 0.0

    def plan(self, rng: random.Random, at_s: float, free: Free, roles: Roles) -> Fault | None:
        free_bookies = set(free.usable(BOOKIE))
        whole = [
            hosts
            for _, hosts in sorted(roles.racks.items())
            if set(hosts) <= free_bookies and len(hosts) <= free.room[BOOKIE]
        ]
        if not whole:
            return None
        return Fault(self.name, at_s, rng.uniform(4.0, 10.0), rng.choice(whole))

    def impairs(self, fault: Fault, roles: Roles) -> Counter[str]:
        return Counter({BOOKIE: len(fault.hosts)})

    def settle_s(self, fault: Fault, roles: Roles) -> float:
        return SETTLE_RESTART_S[BOOKIE]

    def apply(self, cluster: Cluster, fault: Fault) -> dict[str, Any]:
        pids = {}
        for host in fault.hosts:
            proc = cluster.process(host)
            pids[host] = proc.pid
            proc.kill()
        return {"pids": pids}

    def heal(self, cluster: Cluster, fault: Fault, applied: dict[str, Any]) -> dict[str, Any]:
        pids = {}
        for host in fault.hosts:
            proc = cluster.process(host)
            proc.start()
            pids[host] = proc.pid
        return {"pids": pids}


class Wipe(_BookieFault):
    """A bookie's disk lost: SIGKILL and its data dir emptied; at the heal it is
    formatted (once ZooKeeper dropped its old registration) and started as a new
    instance that holds nothing. The planner keeps wipes ``spacing_s`` apart; when they
    run, one wipe at a time, ``WIPE_SPACING_S`` after the last one healed, and only once
    the share of every bookie wiped before is restored (no mark names it), else it is
    skipped: a second disk lost before the first was refilled is past what Qa = 2
    promises."""

    name = "wipe"
    weight = 0.5
    spacing_s = WIPE_SPACING_S
    duration_range_s = (0.5, 3.0)

    def __init__(self) -> None:
        self._wiped: set[str] = set()
        # One wipe at a time in execution too, from its apply to its heal: two that
        # waited for the same refill would otherwise both go once it is done.
        self._turn = threading.Lock()
        self._healed_at = -WIPE_SPACING_S  # monotonic seconds of the last wipe's heal

    def settle_s(self, fault: Fault, roles: Roles) -> float:
        return SETTLE_RESTART_S[BOOKIE]

    def apply(self, cluster: Cluster, fault: Fault) -> dict[str, Any]:
        deadline = time.monotonic() + WIPE_WAIT_S
        if not self._turn.acquire(timeout=WIPE_WAIT_S):
            return {"skipped": f"another wipe still in progress after {WIPE_WAIT_S} s"}
        try:
            while time.monotonic() < self._healed_at + WIPE_SPACING_S or (
                self._wiped and cluster.marks_name(self._wiped) is not False
            ):
                if time.monotonic() > deadline:
                    self._turn.release()
                    return {"skipped": f"a bookie wiped before not refilled after {WIPE_WAIT_S} s"}
                time.sleep(WIPE_POLL_S)
            pid = cluster.process(fault.hosts[0]).pid
            cluster.lose_disk(fault.hosts[0])
        except BaseException:
            self._turn.release()
            raise
        self._wiped.add(fault.hosts[0])
        return {"pid": pid}

    def heal(self, cluster: Cluster, fault: Fault, applied: dict[str, Any]) -> dict[str, Any]:
        if "skipped" in applied:
            return {}
        try:
            cluster.format_and_start(fault.hosts[0])
        finally:
            self._healed_at = time.monotonic()
            self._turn.release()
        return {"pid": cluster.process(fault.hosts[0]).pid}


def kinds(wipes: bool = False) -> list[FaultKind]:
    """Every fault kind of a run, in a fixed order (the planner draws by weight); the
    wipe only with ``wipes`` (module docstring)."""
    out: list[FaultKind] = [
        Kill(),
        Pause(),
        Restart(),
        ZooKeeperLeaderKill(),
        Partition(False),
        Partition(True),
        DiskFull(),
        RackLoss(),
    ]
    return [*out, Wipe()] if wipes else out


@dataclass(frozen=True)
class _Taken:
    until_s: float
    hosts: tuple[str, ...]
    impairs: Counter[str]
    partition: bool


def plan_schedule(
    seed: int,
    seconds: float,
    roles: Roles,
    interval_s: float,
    fault_kinds: Sequence[FaultKind] | None = None,
) -> list[Fault]:
    """The faults of a run of ``seconds``: one every ``interval_s`` on average (a draw
    that finds nothing free is tried again a little later), each healed and settled
    before the end."""
    rng = random.Random(seed)
    table = {k.name: k for k in (fault_kinds if fault_kinds is not None else kinds())}
    faults: list[Fault] = []
    taken: list[_Taken] = []
    last_end: dict[str, float] = {}
    t = FIRST_FAULT_S
    while True:
        t += rng.uniform(0.5, 1.5) * interval_s
        if t >= seconds:
            return faults
        taken = [x for x in taken if x.until_s > t]
        busy = {h for x in taken for h in x.hosts}
        load: Counter[str] = Counter()
        for x in taken:
            load.update(x.impairs)
        free = Free(
            {role: [h for h in hosts if h not in busy] for role, hosts in roles.hosts.items()},
            Counter({role: roles.budget(role) - load[role] for role in roles.hosts}),
            any(x.partition for x in taken),
        )
        names = sorted(table)
        order = rng.choices(names, [table[n].weight for n in names], k=len(names) * 2)
        for name in order:
            kind = table[name]
            if name in last_end and t < last_end[name] + kind.spacing_s:
                continue
            fault = kind.plan(rng, t, free, roles)
            if fault is None:
                continue
            settle = kind.settle_s(fault, roles)
            room = seconds - t - settle
            if room < 0.2:
                continue
            fault = Fault(fault.kind, t, min(fault.duration_s, room), fault.hosts, fault.others)
            faults.append(fault)
            last_end[name] = fault.end_s
            taken.append(
                _Taken(
                    fault.end_s + settle,
                    fault.hosts,
                    kind.impairs(fault, roles),
                    isinstance(kind, Partition),
                )
            )
            break


def _marks_name(http: httpx.Client, url: str, ids: set[str]) -> bool:
    """Whether a mark of the gateway's under-replicated list names a bookie of ``ids``."""
    params: dict[str, Any] = {"limit": 1000}
    while True:
        r = http.get(f"{url}/v1/admin/under-replicated", params=params)
        r.raise_for_status()
        doc = r.json()
        if any(ids & set(m["missing_bookies"]) for m in doc["ledgers"]):
            return True
        if doc["next"] is None:
            return False
        params = {"limit": 1000, "after": doc["next"]}


class LayoutCluster:
    """A ``Cluster`` over a running layout."""

    def __init__(self, layout: Layout):
        self.layout = layout
        self._processes: dict[str, ManagedProcess] = {}
        for proc in [*layout.bookies, *layout.gateways, *layout.auditors, *layout.replicators]:
            self._processes[proc.node.name] = proc
        for server in layout.zookeepers:
            self._processes[server.node.name] = server

    def process(self, host: str) -> ManagedProcess:
        return self._processes[host]

    def zookeeper_leader(self) -> str:
        return self.layout.zookeeper_leader(LEADER_WAIT_S).node.name

    def partition(self, a: Sequence[str], b: Sequence[str], one_way: bool) -> None:
        hosts = self.layout.network.hosts
        self.layout.network.partition([hosts[h] for h in a], [hosts[h] for h in b], one_way)

    def heal_partitions(self) -> None:
        self.layout.network.heal()

    def _bookie(self, host: str) -> HostService:
        return next(b for b in self.layout.bookies if b.node.name == host)

    def fill_disk(self, host: str) -> None:
        disks.fill_disk(self.layout, self._bookie(host))

    def free_disk(self, host: str) -> None:
        disks.free_disk(self.layout, self._bookie(host))

    def lose_disk(self, host: str) -> None:
        disks.lose_disk(self.layout, self._bookie(host))

    def format_and_start(self, host: str) -> None:
        disks.format_and_start(self.layout, self._bookie(host))

    def marks_name(self, hosts: Collection[str]) -> bool | None:
        ids = {self._bookie(h).address for h in hosts}
        with self.layout.client.http_client(timeout_s=MARKS_TIMEOUT_S) as http:
            for gateway in self.layout.gateways:
                try:
                    return _marks_name(http, gateway.url, ids)
                except (httpx.HTTPError, ValueError, KeyError):
                    continue
        return None

    def heal_everything(self) -> list[str]:
        """After the run: heal partitions, free every filled disk, resume and start every
        process that is not running. Returns what it had to do (a fault that did not
        heal is a suite bug)."""
        done = []
        self.heal_partitions()
        for bookie in self.layout.bookies:
            if os.path.ismount(self.layout.data_dirs[bookie.address].parent):
                disks.free_disk(self.layout, bookie)
        for host, proc in self._processes.items():
            proc.resume()
            if not proc.alive():
                proc.start()
                done.append(f"started {host}")
        return done


class Nemesis:
    """Carries out a schedule from the moment ``start`` is called: each fault in a
    thread of its own, which waits for the fault's time, applies it, waits for its end
    and heals it, logging both into the history."""

    def __init__(self, cluster: Cluster, schedule: Sequence[Fault], history: History):
        self.cluster = cluster
        self.schedule = list(schedule)
        self.history = history
        self.errors: list[str] = []
        self.applied = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._table = {k.name: k for k in kinds(wipes=True)}
        # One fault at a time per host, however long an apply or a heal takes (a
        # graceful stop waits out its grace under load): the planner's spacing assumes
        # faults end on time, and two at once would start a process twice.
        self._hosts = {h: threading.Lock() for f in self.schedule for h in f.hosts}
        self._launcher = threading.Thread(target=self._launch, name="nemesis", daemon=True)
        self._start = 0.0

    def start(self) -> Nemesis:
        self._start = time.monotonic()
        self._launcher.start()
        return self

    def _launch(self) -> None:
        for fault in self.schedule:
            if self._wait_until(fault.at_s - 0.05):
                return
            thread = threading.Thread(
                target=self._run_fault, args=(fault,), name=f"fault-{fault.kind}", daemon=True
            )
            thread.start()
            with self._lock:
                self._threads.append(thread)

    def _wait_until(self, offset_s: float) -> bool:
        """Sleep until ``offset_s`` into the run; True if stopped meanwhile."""
        return self._stop.wait(max(0.0, offset_s - (time.monotonic() - self._start)))

    def _run_fault(self, fault: Fault) -> None:
        locks = [self._hosts[h] for h in sorted(fault.hosts)]
        self._wait_until(fault.at_s)
        for lock in locks:
            lock.acquire()
        try:
            self._apply_and_heal(fault)
        finally:
            for lock in reversed(locks):
                lock.release()

    def _apply_and_heal(self, fault: Fault) -> None:
        kind = self._table[fault.kind]
        started_s = time.monotonic() - self._start
        try:
            applied = kind.apply(self.cluster, fault)
        except Exception as exc:  # the fault failed to happen: logged, the run goes on
            self._error(f"{fault.kind} {fault.hosts}: apply: {exc!r}")
            applied = {"error": repr(exc)}
        record = self.history.fault(fault.kind, {**fault.to_json(), **applied})
        with self._lock:
            self.applied += 1
        self._wait_until(max(fault.end_s, started_s + fault.duration_s))
        if "error" in applied:
            self.history.heal(record, {"error": "not applied"})
            return
        try:
            healed = kind.heal(self.cluster, fault, applied)
        except Exception as exc:  # healed after the run by heal_everything
            self._error(f"{fault.kind} {fault.hosts}: heal: {exc!r}")
            healed = {"error": repr(exc)}
        self.history.heal(record, healed)

    def _error(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)

    def join(self, timeout_s: float) -> None:
        """Wait for every fault to be applied and healed (the schedule ends before the
        run does); past ``timeout_s``, stop launching new ones."""
        deadline = time.monotonic() + timeout_s
        self._launcher.join(max(0.0, deadline - time.monotonic()))
        self._stop.set()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
