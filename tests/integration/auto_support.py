"""Helpers of the auto-recovery integration tests: auditor (and replicator) processes seen
through HTTP, and ZooKeeper inspection of the marks, the election and decommissions."""

from __future__ import annotations

import json
import os

import httpx
from kazoo.client import KazooClient

from services.cluster.processes import ServiceProcess
from services.zk import paths as zkpaths
from tests.harness import Cluster, wait_for

# Makes the auditor show its ZooKeeper session in /v1/status (auditor/app.py), so that a
# test can force it to expire.
EXPOSE_SESSION_ENV = "QUIRE_AUDITOR_EXPOSE_SESSION"


class AuditorProc:
    """An auditor process seen through HTTP."""

    def __init__(self, proc: ServiceProcess, secret: str | None = None) -> None:
        self.proc = proc
        headers = {"X-Cluster-Secret": secret} if secret else {}
        self.http = httpx.Client(base_url=proc.url, headers=headers, timeout=30.0)

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
        """Ask for a full check and wait until one that started after the request ends."""
        before = self.audits_completed()
        self.audit()
        wait_for(lambda: self.audits_completed() > before, deadline_s, "a full check")
        return self.status()


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


# start_replicator(cluster, extra_args) lives here too (the replicator's helper adds it).
