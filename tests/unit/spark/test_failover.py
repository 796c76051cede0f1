"""The connector's client with several gateways (services/spark/client.py, docs/spark.md
"Through faults"), against mock gateways: a call that reached no gateway goes to the
next at once and the client stays there; a call without an answer, or answered 503/504,
is sent again until the retry budget is spent, unless it may not be repeated (an
append, whose records would land twice); the list survives pickling to executors."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import httpx
import pytest

from services.spark import limits as spark_limits
from services.spark.client import QuireSparkError, SparkGatewayClient
from services.spark.ingest import IngestClient, WriteOptions
from services.wire.entries_stream import MEDIA_TYPE, encode_frames

GATEWAYS = "http://g1:8080,http://g2:8080"
Answer = Callable[[httpx.Request], httpx.Response]


class Gateways:
    """Mock gateways by host name: ``down`` refuse connections, ``mute`` take the
    request and never answer, ``answers`` are served in turn (then 200 ``{}``)."""

    def __init__(self) -> None:
        self.down: set[str] = set()
        self.mute: set[str] = set()
        self.answers: list[httpx.Response] = []
        self.calls: list[tuple[str, str, str]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        if host in self.down:
            self.calls.append((host, request.method, "refused"))
            raise httpx.ConnectError("refused", request=request)
        self.calls.append((host, request.method, request.url.path))
        if host in self.mute:
            raise httpx.ReadError("connection reset", request=request)
        if request.url.path.endswith("/entries") and request.method == "GET":
            body = encode_frames([(0, b"a"), (1, b"b")])
            return httpx.Response(
                200, headers={"content-type": MEDIA_TYPE}, stream=httpx.ByteStream(body)
            )
        return self.answers.pop(0) if self.answers else httpx.Response(200, json={})

    def client(self) -> SparkGatewayClient:
        return SparkGatewayClient(GATEWAYS, transport=httpx.MockTransport(self.handle))


@pytest.fixture
def gateways(monkeypatch: pytest.MonkeyPatch) -> Gateways:
    monkeypatch.setattr(spark_limits, "RETRY_DELAY_S", 0.0)
    return Gateways()


def unavailable() -> httpx.Response:
    return httpx.Response(503, json={"error": "metadata_unavailable", "message": "election"})


def test_a_refused_call_goes_to_the_next_gateway_which_is_kept(gateways: Gateways) -> None:
    """g1 refuses: the call is served by g2 at once, and so is the next one (the client
    does not knock on the dead gateway for every call)."""
    gateways.down.add("g1")
    with gateways.client() as client:
        client.request("GET", "/v1/logs/x")
        client.request("GET", "/v1/logs/x")
        assert client.url == "http://g2:8080"
    assert gateways.calls == [
        ("g1", "GET", "refused"),
        ("g2", "GET", "/v1/logs/x"),
        ("g2", "GET", "/v1/logs/x"),
    ]


def test_an_append_that_reached_no_gateway_is_sent_to_the_next(gateways: Gateways) -> None:
    """Even a call that may not be repeated goes to the next gateway when the first
    refused the connection: nothing of it was sent."""
    gateways.down.add("g1")
    with gateways.client() as client:
        client.request("POST", "/v1/ledgers/1/entries", repeatable=False, json={})
    assert [c[0] for c in gateways.calls] == ["g1", "g2"]


def test_a_call_without_an_answer_is_sent_again_to_the_next_gateway(gateways: Gateways) -> None:
    """g1 took the request and died: a repeatable call (an attach, a close) is sent to
    g2."""
    gateways.mute.add("g1")
    with gateways.client() as client:
        client.request("POST", "/v1/logs/x/ledgers", json={"ledgers": [5]})
    assert [c[0] for c in gateways.calls] == ["g1", "g2"]


def test_an_append_without_an_answer_is_not_sent_again(gateways: Gateways) -> None:
    """An append that may have landed is not repeated (its records would land twice): it
    fails, gateway_unreachable, and the client's next call goes to the other gateway."""
    gateways.mute.add("g1")
    with gateways.client() as client, pytest.raises(QuireSparkError) as caught:
        client.request("POST", "/v1/ledgers/1/entries", repeatable=False, json={})
    assert caught.value.code == "gateway_unreachable"
    assert "on http://g1:8080" in str(caught.value)
    assert [c[0] for c in gateways.calls] == ["g1"]
    assert client.url == "http://g2:8080"


def test_a_503_is_sent_again_to_the_same_gateway_until_answered(gateways: Gateways) -> None:
    """503 (ZooKeeper lost during an election) is retried where it was answered: a
    close must reach the ledger's writer."""
    gateways.answers = [unavailable(), unavailable(), httpx.Response(200, json={"ok": 1})]
    with gateways.client() as client:
        assert client.request("POST", "/v1/ledgers/1/close") == {"ok": 1}
    assert [c[0] for c in gateways.calls] == ["g1", "g1", "g1"]


def test_an_append_answered_503_fails_at_once(gateways: Gateways) -> None:
    gateways.answers = [unavailable()]
    with gateways.client() as client, pytest.raises(QuireSparkError) as caught:
        client.request("POST", "/v1/ledgers/1/entries", repeatable=False, json={})
    assert (caught.value.status, caught.value.code) == (503, "metadata_unavailable")


def test_a_refusal_is_not_retried(gateways: Gateways) -> None:
    """A 409 is the gateway's answer, not a fault: raised at once."""
    gateways.answers = [httpx.Response(409, json={"error": "not_writer", "message": "no"})]
    with gateways.client() as client, pytest.raises(QuireSparkError) as caught:
        client.request("POST", "/v1/ledgers/1/close")
    assert caught.value.code == "not_writer" and len(gateways.calls) == 1


def test_the_retries_end_with_the_budget(
    gateways: Gateways, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both gateways down for longer than the budget: the last failure is raised."""
    monkeypatch.setattr(spark_limits, "RETRY_DELAY_S", 0.01)
    monkeypatch.setattr(spark_limits, "RETRY_BUDGET_S", 0.1)
    gateways.down |= {"g1", "g2"}
    with gateways.client() as client, pytest.raises(QuireSparkError) as caught:
        client.request("GET", "/v1/logs/x")
    assert caught.value.code == "gateway_unreachable"
    assert 4 <= len(gateways.calls) <= 40


def test_a_range_read_goes_to_the_next_gateway_when_the_first_refuses(
    gateways: Gateways,
) -> None:
    gateways.down.add("g1")
    with gateways.client() as client:
        got = [frames for frames in client.read_range(1, 0, 1)]
    assert got == [[(0, b"a"), (1, b"b")]]
    assert [c[0] for c in gateways.calls] == ["g1", "g2"]


def test_the_gateways_travel_to_executors() -> None:
    client = pickle.loads(pickle.dumps(SparkGatewayClient(GATEWAYS, "tok")))
    assert client.urls == ("http://g1:8080", "http://g2:8080")
    assert (client.url, client.token) == ("http://g1:8080", "tok")


def test_a_write_s_options_take_several_gateways() -> None:
    opts = WriteOptions.parse({"gateway": " g1:8080/, https://g2 ", "log": "x"})
    assert opts.gateway == "http://g1:8080,https://g2"
    assert IngestClient(opts).gateway.urls == ("http://g1:8080", "https://g2")
    with pytest.raises(QuireSparkError, match="gateway"):
        WriteOptions.parse({"gateway": " , ", "log": "x"})
