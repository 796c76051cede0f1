"""Fuzzing the decoders end to end, against a real bookie and a real gateway: every
malformed binary add body a bookie gets, and every malformed JSON batch a gateway gets
(ledger add, log append), is answered with its 4xx and docs/api.md's {"error", "message"},
never a 5xx, and stores nothing: no partial write, not even of the valid records before
the damage. The bulk binary range read decodes to what the JSON read says, however the
stream is cut.

Bodies come from the unit fuzzing's strategies (tests/unit/wire/fuzz_support.py), kept
to those the format refuses whole; the expected status is the reference parser's.
Bounded and deterministic by default (E2E_EXAMPLES per test, derandomized by the "ci"
profile), ten times more with HYPOTHESIS_PROFILE=fuzz (``make fuzz-decoders``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.errors import InvalidArgument, QuireError
from services.wire import entries_stream, framing
from tests.integration.bookie_support import Bookie, sealed
from tests.integration.gateway_support import (
    Gateway,
    assert_error,
    module_cluster,
    start_bookies,
    start_gateway,
    wait_writable,
)
from tests.unit.wire.fuzz_support import (
    batch_docs,
    mutated_bodies,
    parse_add_body,
    records,
    reference_decode,
)

E2E_EXAMPLES = 2_000 if os.environ.get("HYPOTHESIS_PROFILE") == "fuzz" else 200
E2E = settings(
    max_examples=E2E_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
SEED_LEDGER = 424242
LOG = "decoder-fuzz"


@dataclass
class Env:
    bookie: Bookie  # a bookie no ledger of the gateway uses, called directly
    gateway: Gateway
    ledger_id: int  # OPEN, written through the gateway
    payloads: list[bytes]  # what the ledger holds


@pytest.fixture(scope="module")
def env(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    with module_cluster(zookeeper, tmp_path_factory.mktemp("decoder-fuzz")) as cluster:
        start_bookies(cluster, 3)
        gateway = start_gateway(cluster)
        bookie: Bookie | None = None
        try:
            wait_writable(gateway, 3)
            ledger_id = gateway.create()["ledger_id"]
            # Empty, tiny and page-crossing payloads, every byte value.
            payloads = [bytes((n * 7 + i) % 256 for i in range(n * 97 % 3000)) for n in range(40)]
            gateway.add_batch(ledger_id, payloads)
            assert gateway.request("PUT", f"/v1/logs/{LOG}").status_code == 201
            assert gateway.request("POST", f"/v1/logs/{LOG}/writer").status_code == 200
            appended = gateway.request("POST", f"/v1/logs/{LOG}/records", content=b"first")
            assert appended.status_code == 200, appended.text
            # Started once every ledger exists: nothing the gateway does (LAC updates to
            # its ensembles) changes this bookie while the bodies are fuzzed.
            bookie = Bookie(cluster.start_bookie())
            assert bookie.add([sealed(SEED_LEDGER, 0, b"seed")])["stored"] == 1
            yield Env(bookie, gateway, ledger_id, payloads)
        finally:
            if bookie is not None:
                bookie.close()
            gateway.close_client()


# ----------------------------------------------------------------------------- bookie


def refused_whole(body: bytes) -> bool:
    return not isinstance(reference_decode(body), list)


@st.composite
def valid_records_then_damage(draw: st.DrawFn) -> bytes:
    """Valid, sealed records followed by a frame the format refuses (cut, unknown flags,
    a wrong digest length, an entry over the limit): the records before must not be
    stored."""
    good = framing.encode(draw(records()))
    tail = framing.encode(draw(records(max_size=1)))
    damage = draw(st.sampled_from(["cut", "flags", "digest_len", "payload_len"]))
    if damage == "cut":
        tail = tail[: draw(st.integers(1, len(tail) - 1))]
    elif damage == "flags":
        tail = bytes([tail[0] | draw(st.sampled_from([0x06, 0x10, 0x80]))]) + tail[1:]
    elif damage == "digest_len":
        tail = (
            tail[:37] + draw(st.sampled_from([1, 5, 31, 33, 0xFFFF])).to_bytes(2, "big") + tail[39:]
        )
    else:
        tail = tail[:33] + (2**32 - 1).to_bytes(4, "big") + tail[37:]
    return good + tail


malformed_adds = st.one_of(
    valid_records_then_damage(),
    mutated_bodies().filter(refused_whole),
    st.binary(min_size=1, max_size=300).filter(refused_whole),
)


def expected_error(body: bytes) -> type[QuireError]:
    want = reference_decode(body)
    assert not isinstance(want, list)
    return want


def bookie_state(bookie: Bookie) -> tuple[list[int], float]:
    """What any write would change: the ledgers stored, the entries ever stored (the
    counter counts every record an add stored, re-adds of the same bytes included)."""
    return bookie.ledgers(), bookie.metric("quire_bookie_adds_total")


@E2E
@given(body=malformed_adds, chunked=st.booleans())
def test_malformed_binary_adds_are_4xx_and_store_nothing(
    env: Env, body: bytes, chunked: bool
) -> None:
    """A malformed framed body, sent whole or chunked: the reference parser's 4xx
    (invalid_argument 400, payload_too_large 413) with {"error", "message"}, never a 5xx;
    the bookie's ledgers, stored-entry count and the seed ledger's state are unchanged."""
    bookie = env.bookie
    want = expected_error(body)
    content: bytes | Iterator[bytes] = body
    if chunked:  # no Content-Length: read chunk by chunk (bookie.fastpath.read_budgeted)
        third = len(body) // 3 + 1
        content = iter([body[:third], body[third : 2 * third], body[2 * third :]])
    r = bookie.http.post(
        "/v1/entries", content=content, headers={"Content-Type": framing.MEDIA_TYPE}
    )
    assert_error(r, want.http_status, want.code)
    assert bookie_state(bookie) == ([SEED_LEDGER], 1.0)


def test_after_the_fuzzing_the_bookie_serves_its_entries_as_before(env: Env) -> None:
    """The bookie still stores exactly the seed entry in its ledger, in the same state,
    and takes adds (no state left behind by the refused bodies)."""
    bookie = env.bookie
    assert bookie.lac(SEED_LEDGER) == {
        "ledger_id": SEED_LEDGER,
        "lac": -1,
        "last_entry_id": 0,
        "fenced": False,
    }
    assert [r.payload for r in bookie.read_range(SEED_LEDGER, 0, 100)] == [b"seed"]
    assert bookie.add([sealed(SEED_LEDGER, 1, b"after")])["stored"] == 1
    assert bookie.lac(SEED_LEDGER)["last_entry_id"] == 1


# ----------------------------------------------------------------------------- gateway


def refused_batch(raw: bytes) -> bool:
    return not isinstance(parse_add_body(raw), tuple)


bad_batch_bodies = st.one_of(
    batch_docs.map(lambda doc: json.dumps(doc).encode()),
    batch_docs.map(lambda doc: json.dumps(doc).encode()[:-1]),
    st.binary(max_size=200),
).filter(refused_batch)


def expected_batch_error(raw: bytes) -> type[QuireError]:
    want = parse_add_body(raw)
    assert not isinstance(want, tuple)
    return want


def log_records(gateway: Gateway) -> list[str]:
    r = gateway.request("GET", f"/v1/logs/{LOG}/records")
    assert r.status_code == 200, r.text
    return [record["data"] for record in r.json()["records"]]


@E2E
@given(raw=bad_batch_bodies, target=st.sampled_from(["ledger", "log"]))
def test_malformed_json_batches_are_4xx_and_write_nothing(
    env: Env, raw: bytes, target: str
) -> None:
    """A malformed JSON batch add (not JSON, not an object, no or empty entries, an item
    that is not strict base64) to a ledger or a log: its 4xx with {"error", "message"},
    never a 5xx; the ledger's LAC, or the log's records, are unchanged."""
    g = env.gateway
    want = expected_batch_error(raw)
    headers = {"Content-Type": "application/json"}
    if target == "ledger":
        before = g.lac(env.ledger_id)
        r = g.request("POST", f"/v1/ledgers/{env.ledger_id}/entries", content=raw, headers=headers)
        assert_error(r, want.http_status, want.code)
        assert g.lac(env.ledger_id) == before
    else:
        before_records = log_records(g)
        r = g.request("POST", f"/v1/logs/{LOG}/records", content=raw, headers=headers)
        assert_error(r, want.http_status, want.code)
        assert log_records(g) == before_records


def test_the_gateway_ledger_holds_exactly_what_was_written(env: Env) -> None:
    """After the fuzzing the ledger holds exactly its 40 entries and the log its one
    record: nothing of a refused request was added."""
    g = env.gateway
    assert g.lac(env.ledger_id) == len(env.payloads) - 1
    assert g.read_all(env.ledger_id) == list(enumerate(env.payloads))
    assert len(log_records(g)) == 1


@settings(max_examples=50, deadline=None)
@given(cuts=st.lists(st.integers(0, 100_000), max_size=30))
def test_the_bulk_read_decodes_to_the_json_read_however_it_is_cut(
    env: Env, cuts: list[int]
) -> None:
    """The gateway's application/vnd.quire.entries answer, fed to FrameDecoder cut into
    arbitrary chunks, gives exactly the entries the JSON read gives, nothing pending."""
    g = env.gateway
    r = g.request(
        "GET",
        f"/v1/ledgers/{env.ledger_id}/entries",
        headers={"Accept": entries_stream.MEDIA_TYPE},
    )
    assert r.status_code == 200 and r.headers["content-type"] == entries_stream.MEDIA_TYPE
    data = r.content
    decoder, frames = entries_stream.FrameDecoder(), []
    bounds = [0, *sorted({c % (len(data) + 1) for c in cuts}), len(data)]
    for start, end in zip(bounds, bounds[1:], strict=False):
        frames += decoder.feed(data[start:end])
    assert decoder.pending == 0
    assert frames == list(enumerate(env.payloads))


def test_a_bulk_read_cut_short_is_noticed(env: Env) -> None:
    """A bulk answer that stops inside a frame leaves bytes pending (the Spark reader's
    short-read check), and one with a frame header past the limits is InvalidArgument."""
    g = env.gateway
    data = g.request(
        "GET",
        f"/v1/ledgers/{env.ledger_id}/entries",
        headers={"Accept": entries_stream.MEDIA_TYPE},
    ).content
    decoder = entries_stream.FrameDecoder()
    frames = decoder.feed(data[:-1])
    assert frames == list(enumerate(env.payloads))[: len(frames)] and decoder.pending > 0
    with pytest.raises(InvalidArgument):
        entries_stream.FrameDecoder().feed(b"\xff" * 12)
