"""Helpers of the auto-recovery integration tests: start an auditor (seen through HTTP)
or a replication worker, mark ledgers under-replicated directly in ZooKeeper (no
auditor needed), read marks, the election, decommissions, ledger metadata and each
bookie's replicas directly."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Collection

import httpx
from kazoo.client import KazooClient

from services.cluster.processes import ServiceProcess, default_verify, poll_client
from services.protocol.metadata import LedgerMetadata
from services.wire import framing
from services.zk import paths as zkpaths
from tests.harness import Cluster, wait_for


def start_replicator(cluster: Cluster, extra_args: list[str] | None = None) -> ServiceProcess:
    """A replication worker of the cluster (waits for /health 200)."""
    return cluster.start("replicator", extra_args or [])


def replicator_status(proc: ServiceProcess) -> dict:
    r = poll_client().get(f"{proc.url}/v1/status", timeout=10.0)
    assert r.status_code == 200, r.text
    return r.json()


def mark_ledger(
    zk: KazooClient, ledger_id: int, missing: list[str], marked_at_ms: int | None = None
) -> None:
    """Mark a ledger under-replicated as the auditor does, and wake the workers."""
    doc = {
        "missing_bookies": sorted(missing),
        "marked_at": int(time.time() * 1000) if marked_at_ms is None else marked_at_ms,
    }
    zk.create(zkpaths.under_replicated(ledger_id), json.dumps(doc).encode(), makepath=True)
    zk.ensure_path(zkpaths.MARKS_CHANGED)
    zk.set(zkpaths.MARKS_CHANGED, str(time.monotonic_ns()).encode())


def marked_ledgers(zk: KazooClient) -> list[int]:
    """Every marked ledger id (a walk of the mark hierarchy)."""
    out: list[int] = []

    def walk(path: str, parts: list[str]) -> None:
        for child in zk.get_children(path) if zk.exists(path) else []:
            if len(parts) == 4:
                out.append(zkpaths.ledger_id_from_parts([*parts, child]))
            else:
                walk(f"{path}/{child}", [*parts, child])

    walk(zkpaths.UNDER_REPLICATED_LEDGERS, [])
    return sorted(out)


def ledger_metadata(zk: KazooClient, ledger_id: int) -> LedgerMetadata:
    data, _ = zk.get(zkpaths.ledger(ledger_id))
    return LedgerMetadata.from_json(data)


def names(metadata: LedgerMetadata, bookie: str) -> bool:
    """Some fragment of the ledger lists ``bookie``."""
    return any(bookie in f.bookies for f in metadata.fragments)


def replicas(address: str, ledger_id: int, last: int) -> dict[int, framing.FramedRecord]:
    """The entries 0..last one bookie stores (read directly, not through a gateway)."""
    out: dict[int, framing.FramedRecord] = {}
    first = 0
    while first <= last:
        r = poll_client().get(
            f"http://{address}/v1/ledgers/{ledger_id}/entries",
            params={"from": first, "to": last},
            timeout=10.0,
        )
        if r.status_code == 404:
            return out
        assert r.status_code == 200, r.text
        records = framing.decode(r.content, max_records=100_000)
        if not records:
            return out
        out.update({rec.entry_id: rec for rec in records})
        first = records[-1].entry_id + 1
    return out


def fragment_complete(metadata: LedgerMetadata, skip: Collection[str] = ()) -> list[str]:
    """Problems: every (fragment, bookie) whose bookie lacks an entry of its share
    (bookies in ``skip``, known dead and still to be repaired, are not asked)."""
    problems = []
    last_entry = metadata.last_entry_id
    if last_entry is None:
        return ["ledger not closed"]
    for i, fragment in enumerate(metadata.fragments):
        end = (
            metadata.fragments[i + 1].first_entry_id - 1
            if i + 1 < len(metadata.fragments)
            else last_entry
        )
        end = min(end, last_entry)
        for index, bookie in enumerate(fragment.bookies):
            wanted = [
                e
                for e in range(fragment.first_entry_id, end + 1)
                if (index - e) % metadata.ensemble_size < metadata.write_quorum
            ]
            if not wanted or bookie in skip:
                continue
            try:
                held = replicas(bookie, metadata.ledger_id, end)
            except httpx.HTTPError as exc:
                problems.append(f"{bookie}: unreachable ({exc!r})")
                continue
            lacking = [e for e in wanted if e not in held]
            if lacking:
                problems.append(f"{bookie} lacks {lacking[:5]} of fragment {i}")
    return problems


def holds_for(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    """Assert ``predicate`` stays true while ``seconds`` pass (polled): a thing that
    must NOT happen, given the time to happen."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert predicate(), f"no longer true: {what}"
        time.sleep(0.1)


# ------------------------------------------------------------------ auditor

# Makes the auditor show its ZooKeeper session in /v1/status (auditor/app.py), so that a
# test can force it to expire.
EXPOSE_SESSION_ENV = "QUIRE_AUDITOR_EXPOSE_SESSION"


class AuditorProc:
    """An auditor process seen through HTTP."""

    def __init__(self, proc: ServiceProcess, secret: str | None = None) -> None:
        self.proc = proc
        headers = {"X-Cluster-Secret": secret} if secret else {}
        self.http = httpx.Client(
            base_url=proc.url, headers=headers, timeout=30.0, verify=default_verify()
        )

    @property
    def id(self) -> str:
        return self.proc.address

    def status(self) -> dict:
        r = self.http.get("/v1/status")
        assert r.status_code == 200, r.text
        return r.json()

    def elected(self) -> bool:
        try:
            return bool(self.status()["elected"])
        except (httpx.HTTPError, AssertionError):
            return False

    def audit(self) -> dict:
        r = self.http.post("/v1/audit")
        assert r.status_code == 202, r.text
        return r.json()

    def audits_completed(self, kind: str = "full") -> int:
        """Checks of ``kind`` this auditor completed (from its metrics)."""
        r = self.http.get("/metrics")
        assert r.status_code == 200, r.text
        wanted = f'quire_auditor_audits_total{{kind="{kind}",outcome="completed"}}'
        for line in r.text.splitlines():
            if line.startswith(wanted + " "):
                return int(float(line.rsplit(" ", 1)[1]))
        return 0

    def audit_and_wait(self, deadline_s: float = 30.0) -> dict:
        """Ask for a full check and wait until one that started after the request ends
        (one already running when asked does not count: it may have missed a change)."""
        asked_ms = int(time.time() * 1000)
        self.audit()

        def done() -> dict | None:
            status = self.status()
            last = status["last_audit"]
            ok = last is not None and last["kind"] == "full" and last["started_at"] >= asked_ms
            return status if ok else None

        status = wait_for(done, deadline_s, "a full check started after the request")
        assert isinstance(status, dict)
        return status


def start_auditor(
    cluster: Cluster,
    extra_args: list[str] | None = None,
    expose_session: bool = False,
    wait: bool = True,
) -> AuditorProc:
    """An auditor in ``cluster`` (stopped with it); healthy (connected) when ``wait``."""
    env = {**os.environ, EXPOSE_SESSION_ENV: "1"} if expose_session else None
    proc = cluster.start("auditor", extra_args or [], env=env, wait=wait)
    return AuditorProc(proc, cluster.secret)


def wait_elected(auditors: list[AuditorProc], deadline_s: float = 30.0) -> AuditorProc:
    """The one auditor of ``auditors`` that says it is elected (exactly one)."""

    def one() -> AuditorProc | None:
        elected = [a for a in auditors if a.proc.alive() and a.elected()]
        return elected[0] if len(elected) == 1 else None

    found = wait_for(one, deadline_s, "one elected auditor")
    assert isinstance(found, AuditorProc)
    return found


# ------------------------------------------------------------------ ZooKeeper


def marks(zk: KazooClient) -> dict[int, list[str]]:
    """Every mark now: ledger id -> missing bookies."""
    out: dict[int, list[str]] = {}
    base = zkpaths.UNDER_REPLICATED_LEDGERS

    def walk(path: str, parts: list[str]) -> None:
        if not zk.exists(path):
            return
        for child in zk.get_children(path):
            if len(parts) == 4:
                data, _ = zk.get(f"{path}/{child}")
                lid = zkpaths.ledger_id_from_parts([*parts, child])
                out[lid] = json.loads(data)["missing_bookies"]
            else:
                walk(f"{path}/{child}", [*parts, child])

    walk(base, [])
    return out


def election_ids(zk: KazooClient) -> list[str]:
    """The candidates' ids, elected first."""
    path = zkpaths.AUDITOR_ELECTION
    if not zk.exists(path):
        return []
    names = sorted(zk.get_children(path), key=lambda n: n.rsplit("_", 1)[1])
    return [zk.get(f"{path}/{n}")[0].decode() for n in names]


def decommission_state(zk: KazooClient, bookie_id: str) -> str | None:
    path = zkpaths.decommission(bookie_id)
    if not zk.exists(path):
        return None
    return str(json.loads(zk.get(path)[0])["state"])
