"""What ``quire status`` makes of the gateway's answers: the problems, their severity,
and the exit code. Pure: the figures come in as the API's objects, nothing is fetched.

Severities and exit codes (documented in docs/cli.md and ``quire status --help``):

- ``ok`` (exit 0): nothing below.
- ``warning`` (exit ``EXIT_WARNING``, 12): the cluster serves reads and writes but is not
  whole: under-replicated ledgers, replication disabled, a bookie read-only or being
  decommissioned.
- ``critical`` (exit ``EXIT_CRITICAL``, 13): a part is down: the gateway is not ready,
  a bookie is down, no bookie is writable, no auditor is elected (nothing would notice
  a lost bookie), or the gateway could not answer an admin call (ZooKeeper trouble).

Both are above every error code of ``services/cli/client.py`` (1-10) and the wait
timeout (11), so a script can tell "the cluster is unwell" from "the command failed"
(e.g. 3: gateway unreachable, 5: wrong token).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

EXIT_OK = 0
EXIT_WARNING = 12
EXIT_CRITICAL = 13
EXIT_BY_SEVERITY = {"ok": EXIT_OK, "warning": EXIT_WARNING, "critical": EXIT_CRITICAL}

BOOKIE_STATES = ("writable", "readonly", "down", "decommissioning", "decommissioned")


@dataclass(frozen=True, slots=True)
class Problem:
    severity: str  # "warning" | "critical"
    check: str  # a stable name: "bookie_down", "under_replicated", ...
    message: str

    def as_json(self) -> dict[str, str]:
        return {"severity": self.severity, "check": self.check, "message": self.message}


def bookie_counts(bookies: list[dict[str, Any]]) -> dict[str, int]:
    """How many bookies are in each state (every state is a key, 0 when none is)."""
    counts = dict.fromkeys(BOOKIE_STATES, 0)
    for bookie in bookies:
        state = str(bookie.get("state"))
        counts[state] = counts.get(state, 0) + 1
    return counts


def problems(doc: dict[str, Any]) -> list[Problem]:
    """The problems of a status document (``services/cli/status.py``), critical first."""
    found: list[Problem] = []
    if not doc["gateway"]["ready"]:
        found.append(Problem("critical", "gateway_not_ready", "the gateway is not ready"))
    for failure in doc["errors"]:
        found.append(
            Problem(
                "critical",
                "admin_call_failed",
                f"{failure['call']}: {failure['code']}: {failure['message']}",
            )
        )
    auditor = doc["auditor"]
    if auditor is not None and not auditor["elected"]:
        found.append(
            Problem("critical", "no_auditor", "no auditor is elected: lost bookies go unnoticed")
        )
    bookies = doc["bookies"]
    if bookies is not None:
        for row in bookies["list"]:
            if row.get("state") == "down":
                found.append(Problem("critical", "bookie_down", f"bookie {row['id']} is down"))
        if bookies["list"] and bookies["counts"]["writable"] == 0:
            found.append(Problem("critical", "no_writable_bookie", "no bookie is writable"))
        for row in bookies["list"]:
            state = row.get("state")
            if state == "readonly":
                found.append(
                    Problem("warning", "bookie_readonly", f"bookie {row['id']} is read-only")
                )
            elif state == "decommissioning":
                message = f"bookie {row['id']} is being decommissioned"
                found.append(Problem("warning", "bookie_decommissioning", message))
    under = doc["under_replicated"]
    if under is not None and under["count"] > 0:
        count = under["count"]
        found.append(
            Problem(
                "warning",
                "under_replicated",
                f"{count} ledger{'' if count == 1 else 's'} under-replicated",
            )
        )
    if doc["replication_enabled"] is False:
        found.append(
            Problem("warning", "replication_disabled", "re-replication is disabled cluster-wide")
        )
    found.sort(key=lambda p: p.severity != "critical")
    return found


def overall(found: list[Problem]) -> str:
    """``critical`` if any problem is, else ``warning`` if there is one, else ``ok``."""
    if any(p.severity == "critical" for p in found):
        return "critical"
    return "warning" if found else "ok"
