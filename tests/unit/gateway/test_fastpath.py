"""The gateway's add fast path takes exactly the requests it should (clean adds and log
appends, and tailing reads of logs) and leaves every other one to FastAPI; it answers
with the route's own code and the one error mapping."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway import fastpath
from services.errors import LedgerNotFound, LogNotFound
from services.limits import ID_MAX
from services.protocol.logs import Position


class Inner:
    """The FastAPI app behind the fast path: records that it was asked."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.calls.append(scope["path"])


def run(
    path: str,
    body: bytes = b"x",
    headers: list[tuple[bytes, bytes]] | None = None,
    method: str = "POST",
    ready: bool = True,
    query: bytes = b"",
) -> tuple[Inner, list[dict[str, Any]]]:
    inner = Inner()
    routes = fastpath.AddRoutes(lambda: object() if ready else None)  # type: ignore[arg-type,return-value]
    app = fastpath.AddFastPath(inner, routes)
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": headers or [(b"content-length", b"%d" % len(body))],
        "client": ("127.0.0.5", 5000),
        "query_string": query,
    }
    asyncio.run(app(scope, receive, send))
    return inner, sent


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    seen: list[tuple[Any, ...]] = []

    async def add_answer(gw: Any, ledger_id: int, password: Any, raw: bytes, batch: bool) -> Any:
        seen.append(("add", ledger_id, password, raw, batch))
        if ledger_id == 404:
            raise LedgerNotFound("no ledger 404")
        return {"entry_id": 0, "last_add_confirmed": 0}

    async def append_answer(
        gw: Any, name: str, key: Any, raw: bytes, batch: bool, expected: Any, caller: Any
    ) -> Any:
        seen.append(("append", name, key, raw, batch))
        return {"position": {"ledger_id": 1, "entry_id": 2}}

    async def records_answer(gw: Any, name: str, start: Any, limit: int, wait_ms: int) -> Any:
        seen.append(("read", name, start, limit, wait_ms))
        if name == "gone":
            raise LogNotFound("no log 'gone'")
        return {"records": [], "next": str(start), "caught_up": True}

    monkeypatch.setattr(fastpath, "add_answer", add_answer)
    monkeypatch.setattr(fastpath, "append_answer", append_answer)
    monkeypatch.setattr(fastpath, "records_answer", records_answer)
    return seen


def _json(sent: list[dict[str, Any]]) -> tuple[int, Any]:
    return sent[0]["status"], json.loads(sent[1]["body"])


def test_a_clean_add_and_append_never_reach_fastapi(answers: list[tuple[Any, ...]]) -> None:
    inner, sent = run("/v1/ledgers/7/entries", b"raw")
    assert inner.calls == [] and _json(sent) == (200, {"entry_id": 0, "last_add_confirmed": 0})
    assert (b"content-type", b"application/json") in sent[0]["headers"]
    headers = [(b"content-type", b"application/json; charset=utf-8"), (b"x-ledger-password", b"pw")]
    inner, sent = run("/v1/ledgers/0/entries", b'{"entries":[]}', headers)
    assert inner.calls == [] and answers[-1] == ("add", 0, "pw", b'{"entries":[]}', True)
    inner, sent = run("/v1/logs/orders.eu-1/records", b"r", [(b"idempotency-key", b"k 1~")])
    assert inner.calls == [] and answers[-1] == ("append", "orders.eu-1", "k 1~", b"r", False)
    assert _json(sent) == (200, {"position": {"ledger_id": 1, "entry_id": 2}})


def test_errors_are_the_one_mapping(answers: list[tuple[Any, ...]]) -> None:
    inner, sent = run("/v1/ledgers/404/entries")
    assert inner.calls == []
    assert _json(sent) == (404, {"error": "ledger_not_found", "message": "no ledger 404"})
    _, sent = run("/v1/ledgers/1/entries", headers=[(b"content-length", b"99999999999")])
    status, body = _json(sent)
    assert status == 413 and body["error"] == "payload_too_large"
    _, sent = run("/v1/ledgers/1/entries", headers=[(b"content-length", b"12x")])
    assert _json(sent) == (400, {"error": "invalid_argument", "message": "bad Content-Length"})


@pytest.mark.parametrize(
    ("path", "headers", "method", "ready"),
    [
        ("/v1/ledgers/007/entries", None, "POST", True),  # not canonical: FastAPI's 400
        (f"/v1/ledgers/{ID_MAX + 1}/entries", None, "POST", True),
        ("/v1/ledgers/-1/entries", None, "POST", True),
        ("/v1/ledgers/1/entries", None, "GET", True),  # a read
        ("/v1/ledgers/1/entries/", None, "POST", True),
        ("/v1/ledgers/1/close", None, "POST", True),
        ("/v1/ledgers/1/entries", None, "POST", False),  # not ready: FastAPI's 503
        ("/v1/ledgers/1/entries", [(b"x-ledger-password", b"a")] * 2, "POST", True),
        ("/v1/logs/bad name/records", None, "POST", True),
        ("/v1/logs/" + "n" * 201 + "/records", None, "POST", True),
        ("/v1/logs/orders/records", [(b"idempotency-key", b"")], "POST", True),
        ("/v1/logs/orders/records", [(b"idempotency-key", b"k" * 129)], "POST", True),
        ("/v1/logs/orders/records", [(b"idempotency-key", "é".encode("latin-1"))], "POST", True),
        ("/v1/logs/orders/roll", None, "POST", True),
    ],
)
def test_anything_else_goes_on_to_fastapi(
    answers: list[tuple[Any, ...]],
    path: str,
    headers: list[tuple[bytes, bytes]] | None,
    method: str,
    ready: bool,
) -> None:
    inner, sent = run(path, headers=headers, method=method, ready=ready)
    assert inner.calls == [path] and sent == [] and answers == []


def test_a_tailing_read_never_reaches_fastapi(answers: list[tuple[Any, ...]]) -> None:
    """``GET .../records`` with ``from`` (its colon escaped or not), ``limit`` and
    ``wait_ms`` in any order is answered by the route's own code, with the route's
    defaults for what is not given; its errors are the one mapping."""
    path = "/v1/logs/tail-7/records"
    inner, sent = run(path, b"", [], "GET", query=b"limit=100&wait_ms=30000&from=12:3")
    assert inner.calls == [] and answers[-1] == ("read", "tail-7", Position(12, 3), 100, 30000)
    assert _json(sent) == (200, {"records": [], "next": "12:3", "caught_up": True})
    assert (b"content-type", b"application/json") in sent[0]["headers"]
    inner, sent = run(path, b"", [], "GET", query=b"from=0%3a0")
    assert inner.calls == [] and answers[-1] == ("read", "tail-7", Position(0, 0), 1000, 0)
    inner, sent = run(path, b"", [], "GET")
    defaults: tuple[Any, ...] = ("read", "tail-7", None, 1000, 0)
    assert inner.calls == [] and answers[-1] == defaults
    inner, sent = run("/v1/logs/gone/records", b"", [], "GET", query=b"wait_ms=5")
    assert inner.calls == [] and _json(sent) == (
        404,
        {"error": "log_not_found", "message": "no log 'gone'"},
    )


@pytest.mark.parametrize(
    ("path", "method", "query"),
    [
        ("/v1/logs/t/records", "GET", b"from_time=1"),
        ("/v1/logs/t/records", "GET", b"cursor=c"),
        ("/v1/logs/t/records", "GET", b"from=01:2"),  # not canonical: FastAPI's 400
        ("/v1/logs/t/records", "GET", b"from=1:2:3"),
        ("/v1/logs/t/records", "GET", b"from=1%3B2"),
        ("/v1/logs/t/records", "GET", f"from={ID_MAX + 1}:0".encode()),
        ("/v1/logs/t/records", "GET", b"limit=0"),
        ("/v1/logs/t/records", "GET", b"limit=01"),
        ("/v1/logs/t/records", "GET", b"wait_ms=-1"),
        ("/v1/logs/t/records", "GET", f"wait_ms={ID_MAX + 1}".encode()),
        ("/v1/logs/t/records", "GET", b"wait_ms=1&wait_ms=2"),
        ("/v1/logs/t/records", "GET", b"from=1:2&x=1"),
        ("/v1/logs/t/records", "GET", b"from=1:2&"),
        ("/v1/logs/t/records", "GET", b"wait_ms"),
        ("/v1/logs/t/records", "HEAD", b""),
        ("/v1/logs/t/records/", "GET", b""),
        ("/v1/logs/bad name/records", "GET", b""),
        ("/v1/logs/t", "GET", b""),
    ],
)
def test_any_other_read_goes_on_to_fastapi(
    answers: list[tuple[Any, ...]], path: str, method: str, query: bytes
) -> None:
    inner, sent = run(path, b"", [], method, query=query)
    assert inner.calls == [path] and sent == [] and answers == []


def test_a_client_gone_mid_body_gets_an_empty_400(answers: list[tuple[Any, ...]]) -> None:
    inner = Inner()
    app = fastpath.AddFastPath(inner, fastpath.AddRoutes(lambda: object()))  # type: ignore[arg-type,return-value]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/ledgers/1/entries", "headers": []}
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 400 and sent[1]["body"] == b"" and answers == []


_JSON_VALUES = st.one_of(
    st.integers(),
    st.booleans(),
    st.none(),
    st.text(max_size=5),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=12), st.one_of(st.integers(), _JSON_VALUES), max_size=4))
def test_answer_json_writes_what_json_dumps_writes(answer: dict[str, Any]) -> None:
    """The answers' own encoder (a template per set of names, for integer values) gives
    the bytes of ``json.dumps`` with compact separators, for any names and values."""
    expected = json.dumps(answer, separators=(",", ":")).encode()
    assert fastpath.answer_json(answer) == expected  # the template made (or json.dumps)
    assert fastpath.answer_json(answer) == expected  # and the template kept, used again
