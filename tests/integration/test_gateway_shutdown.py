"""A gateway that shuts down (SIGTERM) answers the adds it has in progress before it
exits, through every path an add takes: the lane below ASGI (a raw entry, a JSON
batch), FastAPI's route (a chunked body) and a log append. A stream's records get the
same (tests/integration/test_stream_appends.py)."""

from __future__ import annotations

import base64
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from services.cluster.processes import ZooKeeperProcess
from tests.harness import wait_for
from tests.integration.gateway_support import metric_value, patient_writer

TIMEOUT_S = 60.0
# How long the count of adds in flight must stay at what all four adds make.
STEADY_S = 0.5


class Calls:
    """Each call on a thread of its own to ``url`` with ``method``: its answer (or what
    it raised) in ``answers``, and when it came in ``answered_at``."""

    def __init__(self, url: str, method: str, calls: dict[str, dict]) -> None:  # type: ignore[type-arg]
        self.url, self.method, self.calls = url, method, calls
        self.answers: dict[str, httpx.Response | BaseException] = {}
        self.answered_at: dict[str, float] = {}
        self.threads = [threading.Thread(target=self._call, args=item) for item in calls.items()]

    def _call(self, name: str, kwargs: dict) -> None:  # type: ignore[type-arg]
        try:
            with httpx.Client(base_url=self.url, timeout=TIMEOUT_S) as client:
                self.answers[name] = client.request(self.method, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertions
            self.answers[name] = exc
        self.answered_at[name] = time.monotonic()

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(TIMEOUT_S)


def _chunked(data: bytes) -> Iterator[bytes]:
    yield data[:3]  # no Content-Length: the request goes to FastAPI's route
    yield data[3:]


def test_adds_in_progress_when_the_gateway_shuts_down_are_answered(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    """Four adds wait for a paused bookie (E=3 Qw=3 Qa=3) when the gateway gets SIGTERM;
    the bookie comes back once the shutdown began: each add is answered 200 with its
    entry ids (none refused, none cut off), the gateway then exits by itself, and the
    entries are in the ledger and the log, recovered by another gateway."""
    with patient_writer(zookeeper, tmp_path) as (bookies, a, b):
        quorum = {"ensemble_size": 3, "write_quorum": 3, "ack_quorum": 3}
        lid = a.create(ensemble_size=3, write_quorum=3, ack_quorum=3)["ledger_id"]
        r = a.http.put("/v1/logs/shutdown-log", json=quorum)
        assert r.status_code == 201, r.text
        r = a.http.post("/v1/logs/shutdown-log/writer")
        assert r.status_code == 200, r.text
        path = f"/v1/ledgers/{lid}/entries"
        batch_entries = [b"batch-%d" % i for i in range(3)]
        calls = {
            "raw": dict(url=path, content=b"raw-entry"),
            "batch": dict(
                url=path,
                json={"entries": [base64.b64encode(e).decode() for e in batch_entries]},
            ),
            "chunked": dict(url=path, content=_chunked(b"chunked-entry")),
            "append": dict(url="/v1/logs/shutdown-log/records", content=b"log-record"),
        }
        adds = Calls(a.url, "POST", calls)
        answers = adds.answers
        bookies[0].pause()
        try:
            adds.start()
            # Every add taken and sent on to the bookies: 6 entries, each counted once per
            # bookie until that bookie answers; the paused one never does, so once the
            # others answered the count is 6 and stays there. (A count of 6 reached early,
            # while the others had not answered yet, let SIGTERM come before the fourth
            # add was sent: seen in a loaded full run.)
            steady: list[float] = []

            def sent_and_steady() -> bool:
                if metric_value(a.metrics(), "quire_gateway_adds_in_flight") != 6:
                    steady.clear()
                    return False
                steady.append(time.monotonic())
                return steady[-1] - steady[0] >= STEADY_S

            wait_for(sent_and_steady, 20.0, "the gateway to send the four adds")
            assert answers == {}
            a.proc.signal(signal.SIGTERM)
            wait_for(
                lambda: "Shutting down" in a.proc.log_path.read_text(),
                20.0,
                "the gateway to begin its shutdown",
            )
            assert answers == {}
        finally:
            bookies[0].resume()
            adds.join()
        for name, answer in answers.items():
            assert isinstance(answer, httpx.Response), (name, answer)
            assert answer.status_code == 200, (name, answer.text)
        assert set(answers) == set(calls)
        assert a.proc.proc is not None
        assert a.proc.proc.wait(timeout=30) in (0, -signal.SIGTERM)

        b.recover(lid)
        entries = dict(b.read_all(lid))
        raw = answers["raw"]
        assert isinstance(raw, httpx.Response)
        assert entries[raw.json()["entry_id"]] == b"raw-entry"
        chunked = answers["chunked"]
        assert isinstance(chunked, httpx.Response)
        assert entries[chunked.json()["entry_id"]] == b"chunked-entry"
        batch = answers["batch"]
        assert isinstance(batch, httpx.Response)
        first, last = batch.json()["first_entry_id"], batch.json()["last_entry_id"]
        assert [entries[e] for e in range(first, last + 1)] == batch_entries
        appended = answers["append"]
        assert isinstance(appended, httpx.Response)
        position = appended.json()["position"]
        r = b.http.post("/v1/logs/shutdown-log/writer")  # recovers a's last ledger
        assert r.status_code == 200, r.text
        r = b.http.get(
            "/v1/logs/shutdown-log/records",
            params={"from": f"{position['ledger_id']}:{position['entry_id']}"},
        )
        assert r.status_code == 200, r.text
        assert base64.b64decode(r.json()["records"][0]["data"]) == b"log-record"


def test_long_polls_answer_at_once_when_the_gateway_shuts_down(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    """Long polls of 30 s wait on gateway ``a`` when it gets SIGTERM: a tailing read of
    a log ``a`` writes (woken on its write handle), a LAC poll of a ledger ``a`` writes
    (on its handle) and a LAC poll of a ledger ``b`` writes (on the bookies' own long
    polls), each past the end. Each is answered 200 with what there is, nothing new, at
    once, with ``Connection: close``, and ``a`` exits within seconds, not when the polls
    would have ended (gateway/stopping.py)."""
    with patient_writer(zookeeper, tmp_path) as (_bookies, a, b):
        quorum = {"ensemble_size": 3, "write_quorum": 3, "ack_quorum": 2}
        assert a.http.put("/v1/logs/tailed", json=quorum).status_code == 201
        assert a.http.post("/v1/logs/tailed/writer").status_code == 200
        r = a.http.post("/v1/logs/tailed/records", content=b"only")
        assert r.status_code == 200, r.text
        after_only = r.json()["position"]
        next_from = f"{after_only['ledger_id']}:{after_only['entry_id'] + 1}"
        own = a.create(**quorum)["ledger_id"]
        a.add_batch(own, [b"zero", b"one"])
        other = b.create(**quorum)["ledger_id"]
        b.add_batch(other, [b"zero", b"one"])
        wait = {"wait_ms": 30000}
        calls = {
            "tail": dict(url="/v1/logs/tailed/records", params={"from": next_from, **wait}),
            "own_lac": dict(url=f"/v1/ledgers/{own}/lac", params={"after": 1, **wait}),
            "other_lac": dict(url=f"/v1/ledgers/{other}/lac", params={"after": 1, **wait}),
        }
        polls = Calls(a.url, "GET", calls)
        answers, answered_at = polls.answers, polls.answered_at
        polls.start()
        try:
            # All three waiting: the gateway counts its requests in progress.
            wait_for(
                lambda: metric_value(a.metrics(), "quire_gateway_long_polls_waiting") == 3,
                20.0,
                "the three long polls to wait",
            )
            assert answers == {}
            signalled = time.monotonic()
            a.proc.signal(signal.SIGTERM)
        finally:
            polls.join()
        assert a.proc.proc is not None
        assert a.proc.proc.wait(timeout=20) in (0, -signal.SIGTERM)
        exited = time.monotonic() - signalled
        for name, answer in answers.items():
            assert isinstance(answer, httpx.Response), (name, answer)
            assert answer.status_code == 200, (name, answer.text)
            # Woken once the server told each connection to close after its answer, so
            # a reader asks again elsewhere rather than on this gateway.
            assert answer.headers.get("connection") == "close", (name, answer.headers)
        assert set(answers) == set(calls)
        tail = answers["tail"]
        assert isinstance(tail, httpx.Response) and tail.json()["records"] == []
        own_lac, other_lac = answers["own_lac"], answers["other_lac"]
        assert isinstance(own_lac, httpx.Response) and isinstance(other_lac, httpx.Response)
        assert own_lac.json()["last_add_confirmed"] == 1  # the handle's
        # The bookies' (b's LAC reaches them with its next add or LAC update).
        assert other_lac.json()["last_add_confirmed"] in (-1, 0, 1)
        # Answered and gone within seconds of the signal (the polls had 30 s left; the
        # margin covers a loaded machine, not a wait's end).
        assert max(answered_at.values()) - signalled < 10.0, answered_at
        assert exited < 15.0, exited
