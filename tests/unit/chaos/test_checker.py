"""The chaos suite's checker (tests/chaos/checker.py) on hand-made histories: a clean
history passes, and each property, broken on purpose, is reported by its check, so a
check that stops working fails here."""

from __future__ import annotations

import copy
from typing import Any

from tests.chaos import checker
from tests.chaos.history import FAULT, HEAL, INVOKE, Record

GATEWAYS = ["gateway1", "gateway2"]


class Script:
    """Builds a history one record at a time, times ascending."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.t = 0.0

    def _add(
        self, process: str, type_: str, f: str, value: dict[str, Any], ref: int | None = None
    ) -> Record:
        self.t += 1.0
        record = Record(len(self.records), self.t, process, type_, f, value, ref)
        self.records.append(record)
        return record

    def op(
        self, process: str, f: str, value: dict[str, Any], outcome: str, result: dict[str, Any]
    ) -> Record:
        invocation = self._add(process, INVOKE, f, value)
        return self._add(process, outcome, f, result, invocation.i)

    def invoke(self, process: str, f: str, value: dict[str, Any]) -> Record:
        return self._add(process, INVOKE, f, value)

    def complete(self, invocation: Record, outcome: str, result: dict[str, Any]) -> None:
        self._add(invocation.process, outcome, invocation.f, result, invocation.i)

    def fault(self, f: str) -> Record:
        return self._add("nemesis", FAULT, f, {})

    def heal(self, fault: Record) -> None:
        self._add("nemesis", HEAL, fault.f, {}, fault.i)


def add(s: Script, lid: int, entries: list[str], first: int | None, outcome: str = "ok") -> None:
    value = {"gateway": "gateway1", "ledger_id": lid, "entries": entries}
    s.op("w", "ledger_add", value, outcome, {"first_entry_id": first} if outcome == "ok" else {})


def append(
    s: Script,
    key: str,
    records: list[str],
    at: tuple[int, int] | None,
    gateway: str = "gateway1",
    log: str = "log",
    process: str = "lw",
) -> None:
    value = {"gateway": gateway, "log": log, "key": key, "records": records}
    result = {"first": list(at), "last": [at[0], at[1] + len(records) - 1]} if at else {}
    s.op(process, "log_append", value, "ok" if at else "unknown", result)


def ledger_view(entries: list[str], state: str = "CLOSED") -> dict[str, Any]:
    return {
        "state": state,
        "last_entry_id": len(entries) - 1,
        "entries": [[i, e] for i, e in enumerate(entries)],
    }


def clean() -> tuple[Script, dict[str, Any]]:
    """Ledger 7 holds a, b, c (c of an unknown add); log ``log`` holds k1, k2 in ledger
    20, made by gateway1 at epoch 1; a reader read k1 then k2; everything placed."""
    s = Script()
    s.op("w", "ledger_create", {"gateway": "gateway1"}, "ok", {"ledger_id": 7})
    add(s, 7, ["a", "b"], 0)
    add(s, 7, ["c"], None, outcome="unknown")
    s.op("w", "ledger_close", {"gateway": "gateway1", "ledger_id": 7}, "ok", {"last_entry_id": 2})
    s.op("lw", "log_writer", {"gateway": "gateway1", "log": "log"}, "ok", {"epoch": 1})
    append(s, "k1", ["k1/0"], (20, 0))
    append(s, "k2", ["k2/0"], (20, 1))
    value = {"gateway": "gateway2", "log": "log", "from": None}
    s.op("r", "log_read", value, "ok", {"records": [[20, 0, "k1/0"]], "next": "20:1"})
    s.op("r", "log_read", value, "ok", {"records": [[20, 1, "k2/0"]], "next": "20:2"})
    s.op("lr", "ledger_read", {"gateway": "gateway2", "ledger_id": 7}, "ok",
         {"entries": [[0, "a"], [1, "b"]]})  # fmt: skip
    log_view = {"records": [[20, 0, "k1/0"], [20, 1, "k2/0"]]}
    final = {
        "gateways": GATEWAYS,
        "addresses": {"gateway1": "gateway1:8080", "gateway2": "gateway2:8080"},
        "ledgers": {"7": {g: ledger_view(["a", "b", "c"]) for g in GATEWAYS}},
        "logs": {"log": {g: copy.deepcopy(log_view) for g in GATEWAYS}},
        "metadata": {
            "7": {
                "state": "CLOSED",
                "last_entry_id": 2,
                "ensemble_size": 3,
                "write_quorum": 2,
                "fragments": [{"first_entry_id": 0, "bookies": ["b1", "b2", "b3"]}],
                "metadata": {},
            },
            "20": {
                "state": "CLOSED",
                "last_entry_id": 1,
                "ensemble_size": 2,
                "write_quorum": 2,
                "fragments": [{"first_entry_id": 0, "bookies": ["b1", "b2"]}],
                "metadata": {"quire.log.writer": "gateway1:8080"},
            },
        },
        "stored": {
            "7": {"b1": [[0, 0], [2, 2]], "b2": [[0, 1]], "b3": [[1, 2]]},
            "20": {"b1": [[0, 1]], "b2": [[0, 1]]},
        },
        "replication": {"bound_s": 60.0, "emptied_after_s": 3.0, "remaining": []},
    }
    return s, final


def checks(s: Script, final: dict[str, Any]) -> set[str]:
    return {v.check for v in checker.check(s.records, final)}


def test_a_clean_history_has_no_violation() -> None:
    s, final = clean()
    assert checker.check(s.records, final) == []


def test_an_acknowledged_entry_read_back_otherwise_is_reported() -> None:
    s, final = clean()
    final["ledgers"]["7"]["gateway2"]["entries"][1][1] = "B"
    assert "acknowledged" in checks(s, final)


def test_an_entry_never_sent_is_reported() -> None:
    s, final = clean()
    for g in GATEWAYS:
        final["ledgers"]["7"][g] = ledger_view(["a", "b", "c", "zzz"])
    assert checks(s, final) >= {"phantom"}


def test_gateways_that_disagree_on_a_closed_ledger_are_reported() -> None:
    s, final = clean()
    final["ledgers"]["7"]["gateway1"] = ledger_view(["a", "b"])
    assert "agreement" in checks(s, final)


def test_a_close_answered_with_another_end_is_reported() -> None:
    s, final = clean()
    for g in GATEWAYS:
        final["ledgers"]["7"][g] = ledger_view(["a", "b"])
    assert [v.check for v in checker.check(s.records, final)] == ["agreement"]


def test_a_gap_in_a_closed_ledger_is_reported() -> None:
    s, final = clean()
    for g in GATEWAYS:
        final["ledgers"]["7"][g]["entries"] = [[0, "a"], [2, "c"]]
    assert "agreement" in checks(s, final)


def test_two_gateways_in_one_epoch_are_reported() -> None:
    s, final = clean()
    s.op("lw2", "log_writer", {"gateway": "gateway2", "log": "log"}, "ok", {"epoch": 1})
    assert checks(s, final) == {"one_writer"}


def test_an_append_acknowledged_in_a_ledger_no_gateway_of_the_cluster_made_is_reported() -> None:
    """An append may land in another gateway's ledger (it was forwarded to the writer),
    never in one no log writer of the cluster made (attached, or made elsewhere)."""
    s, final = clean()
    final["metadata"]["20"]["metadata"]["quire.log.writer"] = "gateway2:8080"
    assert checks(s, final) == set()
    final["metadata"]["20"]["metadata"]["quire.log.writer"] = "elsewhere:8080"
    assert checks(s, final) == {"one_writer"}
    del final["metadata"]["20"]["metadata"]["quire.log.writer"]
    assert checks(s, final) == {"one_writer"}


def test_a_key_appended_twice_is_reported() -> None:
    s, final = clean()
    for g in GATEWAYS:
        final["logs"]["log"][g]["records"].append([21, 0, "k1/0"])
    assert "exactly_once" in checks(s, final)


def test_an_acknowledged_key_missing_from_the_log_is_reported() -> None:
    s, final = clean()
    append(s, "k3", ["k3/0"], (20, 2))
    assert {"exactly_once", "acknowledged"} <= checks(s, final)


def test_an_unknown_key_may_be_absent_or_present_once() -> None:
    s, final = clean()
    append(s, "k3", ["k3/0"], None)
    assert checker.check(s.records, final) == []
    for g in GATEWAYS:
        final["logs"]["log"][g]["records"].append([20, 2, "k3/0"])
    assert checker.check(s.records, final) == []


def test_keys_out_of_acknowledgement_order_are_reported() -> None:
    """k2 was acknowledged (in ``clean``) after k1; a log holding k2 first breaks it."""
    s, final = clean()
    for g in GATEWAYS:
        final["logs"]["log"][g]["records"] = [[20, 0, "k2/0"], [20, 1, "k1/0"]]
    assert "exactly_once" in checks(s, final)


def test_concurrent_keys_may_land_in_either_order() -> None:
    """Two appends in flight at once have no order to keep."""
    s, final = clean()
    v3 = {"gateway": "gateway1", "log": "log", "key": "k3", "records": ["k3/0"]}
    v4 = {"gateway": "gateway1", "log": "log", "key": "k4", "records": ["k4/0"]}
    i3, i4 = s.invoke("a", "log_append", v3), s.invoke("b", "log_append", v4)
    s.complete(i3, "ok", {"first": [20, 3], "last": [20, 3]})
    s.complete(i4, "ok", {"first": [20, 2], "last": [20, 2]})
    for g in GATEWAYS:
        final["logs"]["log"][g]["records"] += [[20, 2, "k4/0"], [20, 3, "k3/0"]]
    assert checker.check(s.records, final) == []


def test_a_reader_that_saw_another_order_is_reported() -> None:
    s, final = clean()
    value = {"gateway": "gateway2", "log": "log", "from": "20:2"}
    s.op("r", "log_read", value, "ok", {"records": [[20, 2, "k1/0"]], "next": "20:3"})
    assert "prefix" in checks(s, final)


def test_a_spark_read_from_a_position_is_judged_from_that_position() -> None:
    """A Spark reader's batch read starts at its ``start`` (tests/chaos/workload.py
    ``SparkReader``), not where its last read ended."""
    s, final = clean()
    value = {"gateway": "spark", "log": "log", "start": "20:1"}
    s.op("spark-reader", "log_read", value, "ok", {"records": [[20, 1, "k2/0"]], "next": None})
    s.op("spark-reader", "log_read", value, "ok", {"records": [[20, 1, "k2/0"]], "next": None})
    assert checker.check(s.records, final) == []
    s.op("spark-reader", "log_read", value, "ok", {"records": [[20, 0, "k1/0"]], "next": None})
    assert checks(s, final) == {"prefix"}


def test_a_log_read_refused_as_bad_input_is_reported() -> None:
    """The workload reads only from positions the cluster handed out: a 400 is a gateway
    refusing a ``next`` another gave (a 503 to retry is not a violation)."""
    s, final = clean()
    value = {"gateway": "gateway1", "log": "log", "from": "20:2"}
    s.op("r", "log_read", value, "fail", {"status": 503, "error": "metadata_unavailable"})
    assert checks(s, final) == set()
    s.op("r", "log_read", value, "fail", {"status": 400, "error": "invalid_argument"})
    assert checks(s, final) == {"position"}


def test_a_ledger_reader_that_saw_other_bytes_is_reported() -> None:
    s, final = clean()
    s.op("lr", "ledger_read", {"gateway": "gateway1", "ledger_id": 7}, "ok",
         {"entries": [[0, "x"]]})  # fmt: skip
    assert checks(s, final) == {"prefix"}


def test_logs_that_read_differently_by_gateway_are_reported() -> None:
    s, final = clean()
    final["logs"]["log"]["gateway2"]["records"].pop()
    assert "agreement" in checks(s, final)


def test_replication_that_never_finished_is_reported() -> None:
    s, final = clean()
    final["replication"] = {"bound_s": 60.0, "emptied_after_s": None, "remaining": [7]}
    assert checks(s, final) == {"replication"}


def test_a_fragment_naming_a_bookie_without_its_entries_is_reported() -> None:
    """Entry 1 of ledger 7 has write set (1, 2): b2 and b3; b3 not holding it breaks it."""
    s, final = clean()
    final["stored"]["7"]["b3"] = [[2, 2]]
    found = checker.check(s.records, final)
    assert [v.check for v in found] == ["placement"]
    assert "b3" in found[0].message and "[1]" in found[0].message


def test_an_invocation_without_completion_is_reported() -> None:
    s, final = clean()
    s.invoke("w", "ledger_add", {"gateway": "gateway1", "ledger_id": 7, "entries": ["c"]})
    assert checks(s, final) == {"complete"}


def test_figures_count_faults_and_outcomes_and_attribute_stalls() -> None:
    """A gap between acknowledged writes counts for every fault kind active during it."""
    s = Script()
    add(s, 1, ["a"], 0)  # acknowledged at t=2
    fault = s.fault("kill")  # t=3
    add(s, 1, ["b"], None, outcome="unknown")  # t=4, t=5
    s.heal(fault)  # t=6
    add(s, 1, ["c"], 1)  # acknowledged at t=8
    add(s, 1, ["d"], 2)  # acknowledged at t=10
    figures = checker.figures(s.records)
    assert figures["faults"] == {"kill": 1}
    assert figures["operations"] == {"ledger_add": {"ok": 3, "unknown": 1}}
    assert figures["unknown"] == 1
    assert figures["max_stall_s"] == {"kill": 6.0, "none": 2.0}
