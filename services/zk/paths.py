"""Every ZooKeeper path Quire uses, built in this one module.

All paths are relative to the service's chroot (``--zk-root``, default
``/quire``), which kazoo applies to every call.

    /bookies/{bookie_id}                   ephemeral registration (JSON: address, state)
    /cookies/{bookie_id}                   persistent cookie (JSON: instance_id)
    /idgen/{hob}/ID-{seq}                  64-bit ledger id generation (transient nodes)
    /ledgers/000/0000/0000/0000/L0001      ledger metadata, hierarchical by zero-padded id
    /logs/L{name}                          log metadata (the "L" keeps "." and ".." valid)
    /logs/L{name}/cursors/C{cursor}        a durable cursor of the log (JSON: position,
                                           acked_at, created_at; "C" as "L" above)
    /logs/L{name}/keys/S{seq}              keys of the log's closed ledgers, saved for a new
                                           writer's idempotency window (binary:
                                           services/protocol/saved_keys.py)
    /underreplication/ledgers/...          under-replicated marks (same hierarchy as ledgers)
    /underreplication/locks/{ledger_id}    replication worker locks (ephemeral)
    /underreplication/disabled             present while replication is disabled
    /underreplication/changed              data bumped whenever marks are added (workers watch it)
    /decommission/{bookie_id}              persistent: {"state": "decommissioning"|"decommissioned"}
    /auditor/election/n_{seq}              election candidates (ephemeral sequential; data: id)
    /auditor/audit-request                 data bumped to ask the elected auditor for a full check
    /gateways/{host:port}                  ephemeral registration of a gateway (JSON: address,
                                           scheme, draining)
"""

from __future__ import annotations

from services.errors import InvalidArgument
from services.limits import ID_MAX

BOOKIES = "/bookies"
COOKIES = "/cookies"
IDGEN = "/idgen"
LEDGERS = "/ledgers"
LOGS = "/logs"
UNDER_REPLICATION = "/underreplication"
UNDER_REPLICATED_LEDGERS = f"{UNDER_REPLICATION}/ledgers"
REPLICATION_LOCKS = f"{UNDER_REPLICATION}/locks"
REPLICATION_DISABLED = f"{UNDER_REPLICATION}/disabled"
AUDITOR_ELECTION = "/auditor/election"
GATEWAYS = "/gateways"

LEDGER_ID_MAX = ID_MAX
LEDGER_ID_DIGITS = 19
LEDGER_LEAF_PREFIX = "L"  # the leaf level's names: "L" and the last digits
_ID_SPLIT = (3, 4, 4, 4, 4)


def bookie(bookie_id: str) -> str:
    return f"{BOOKIES}/{bookie_id}"


def gateway(address: str) -> str:
    return f"{GATEWAYS}/{address}"


def cookie(bookie_id: str) -> str:
    return f"{COOKIES}/{bookie_id}"


def _hierarchy(ledger_id: int) -> list[str]:
    if not 0 <= ledger_id <= LEDGER_ID_MAX:
        raise InvalidArgument(f"ledger id out of range: {ledger_id}")
    digits = f"{ledger_id:0{LEDGER_ID_DIGITS}d}"
    parts, pos = [], 0
    for width in _ID_SPLIT:
        parts.append(digits[pos : pos + width])
        pos += width
    parts[-1] = "L" + parts[-1]
    return parts


def ledger(ledger_id: int) -> str:
    """``/ledgers/000/0000/0000/0000/L0001``: at most 10,000 children per znode."""
    return LEDGERS + "/" + "/".join(_hierarchy(ledger_id))


def under_replicated(ledger_id: int) -> str:
    return UNDER_REPLICATED_LEDGERS + "/" + "/".join(_hierarchy(ledger_id))


def ledger_id_from_parts(parts: list[str]) -> int:
    """Inverse of the hierarchy: the five path components below ``/ledgers``."""
    if len(parts) != len(_ID_SPLIT) or not parts[-1].startswith("L"):
        raise ValueError(f"not a ledger path: {parts}")
    return int("".join(parts[:-1]) + parts[-1][1:])


def replication_lock(ledger_id: int) -> str:
    return f"{REPLICATION_LOCKS}/{ledger_id}"


LOG_PREFIX = "L"


def log(name: str) -> str:
    """``/logs/L{name}``: ZooKeeper refuses "." and ".." as names, which are log names."""
    return f"{LOGS}/{LOG_PREFIX}{name}"


CURSORS = "cursors"


def cursors(name: str) -> str:
    """``/logs/L{name}/cursors``: the parent of the log's cursors (made with the first)."""
    return f"{log(name)}/{CURSORS}"


CURSOR_PREFIX = "C"


def cursor(name: str, cursor_name: str) -> str:
    """``/logs/L{name}/cursors/C{cursor}``: cursor names follow log names, "." and ".."
    included, which ZooKeeper refuses as znode names."""
    return f"{cursors(name)}/{CURSOR_PREFIX}{cursor_name}"


def cursor_name(child: str) -> str | None:
    """The cursor name of a child of a log's ``cursors`` znode (None for anything else)."""
    return child[len(CURSOR_PREFIX) :] if child.startswith(CURSOR_PREFIX) else None


def log_name(child: str) -> str | None:
    """The log name of a child of ``/logs`` (None for anything else)."""
    return child[len(LOG_PREFIX) :] if child.startswith(LOG_PREFIX) else None


SAVED_KEYS = "keys"
SEGMENT_PREFIX = "S"
_SEGMENT_DIGITS = 10


def saved_keys(name: str) -> str:
    """``/logs/L{name}/keys``: the parent of the log's segments of saved keys."""
    return f"{log(name)}/{SAVED_KEYS}"


def saved_keys_segment(name: str, seq: int) -> str:
    """``/logs/L{name}/keys/S{seq}``, zero-padded so that names sort as numbers."""
    return f"{saved_keys(name)}/{SEGMENT_PREFIX}{seq:0{_SEGMENT_DIGITS}d}"


def segment_seq(child: str) -> int | None:
    """The number of a child of a log's ``keys`` znode (None for anything else)."""
    digits = child[len(SEGMENT_PREFIX) :]
    if not child.startswith(SEGMENT_PREFIX) or not digits.isdigit():
        return None
    return int(digits)


DECOMMISSION = "/decommission"
AUDIT_REQUEST = "/auditor/audit-request"
PLACEMENT_REPORT = "/auditor/placement"
MARKS_CHANGED = f"{UNDER_REPLICATION}/changed"


def decommission(bookie_id: str) -> str:
    """``/decommission/{bookie_id}``: persistent, JSON ``{"state", "requested_at"}``."""
    return f"{DECOMMISSION}/{bookie_id}"
