"""Ledger metadata (services/protocol/metadata.py): validation, fragments, the znode
body and the API object."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.errors import InvalidArgument, InvariantViolation
from services.protocol import metadata as metadata_module
from services.protocol import quorum
from services.protocol.metadata import Fragment, LedgerMetadata, LedgerState

ENSEMBLE = ("b1:1", "b2:1", "b3:1")


def ledger(**kw: object) -> LedgerMetadata:
    args: dict[str, object] = {
        "ledger_id": 7,
        "ensemble": ENSEMBLE,
        "write_quorum": 2,
        "ack_quorum": 2,
        "password_hash": "pbkdf2-sha256$1$salt$hash",
        "custom": {"owner": "tests"},
        "created_at": 1_700_000_000_000,
    }
    args.update(kw)
    return LedgerMetadata.new(**args)  # type: ignore[arg-type]


def test_metadata_holds_every_field_of_protocol_md() -> None:
    """docs/protocol.md Ledgers: id, E, Qw, Qa, state, last entry (null unless CLOSED),
    fragments, digest type, password hash, custom metadata, creation time."""
    md = ledger()
    assert (md.ledger_id, md.ensemble_size, md.write_quorum, md.ack_quorum) == (7, 3, 2, 2)
    assert md.state is LedgerState.OPEN and md.last_entry_id is None and md.length == 0
    assert md.fragments == (Fragment(0, ENSEMBLE),)
    assert md.digest_type == "crc32c"
    assert md.password_hash and md.custom == {"owner": "tests"}
    assert md.created_at == 1_700_000_000_000


@pytest.mark.parametrize(("w", "a"), [(4, 2), (2, 3), (0, 0), (2, 0)])
def test_creation_rejects_sizes_that_break_e_ge_qw_ge_qa_ge_1(w: int, a: int) -> None:
    """docs/protocol.md Ledgers: creation requires E >= Qw >= Qa >= 1 (InvalidArgument)."""
    with pytest.raises(InvalidArgument):
        ledger(write_quorum=w, ack_quorum=a)


def test_validation_of_fragments_state_and_digest() -> None:
    """Metadata that breaks its own rules is refused, never stored or used."""
    md = ledger()
    bad = [
        {"fragments": ()},
        {"fragments": (Fragment(1, ENSEMBLE),)},
        {"fragments": (Fragment(0, ENSEMBLE), Fragment(0, ENSEMBLE))},
        {"fragments": (Fragment(0, ("b1:1", "b1:1", "b2:1")),)},
        {"fragments": (Fragment(0, ("b1:1", "b2:1")),)},
        {"state": LedgerState.CLOSED},  # CLOSED without a last entry
        {"last_entry_id": 3},  # a last entry while OPEN
        {"digest_type": "md5"},
        {"length": -1},
        {"ledger_id": -1},
        {"ledger_id": 1 << 63},
    ]
    # Every field given at construction (the write sets are derived).
    init_fields = {f.name: getattr(md, f.name) for f in dataclasses.fields(md) if f.init}
    for change in bad:
        with pytest.raises(InvalidArgument):
            LedgerMetadata(**{**init_fields, **change})


def test_fragment_for_and_write_sets_follow_fragment_boundaries() -> None:
    """docs/protocol.md Ledgers/Failure while writing: an entry has one ensemble, the fragment
    that contains it; its write quorum is striped over that ensemble."""
    md = ledger().with_ensemble(12, ("b4:1", "b2:1", "b3:1"))
    assert md.fragment_for(0).first_entry_id == 0
    assert md.fragment_for(11).bookies == ENSEMBLE
    assert md.fragment_for(12).bookies == ("b4:1", "b2:1", "b3:1")
    assert md.fragment_for(10**9) is md.last_fragment
    assert md.write_set_bookies(11) == ("b3:1", "b1:1")  # 11 % 3 = 2
    assert md.write_set_bookies(12) == ("b4:1", "b2:1")
    assert md.ensemble == ("b4:1", "b2:1", "b3:1")
    assert md.bookies() == ("b1:1", "b2:1", "b3:1", "b4:1")


def test_ensemble_change_at_the_last_fragment_start_replaces_it_in_place() -> None:
    """A new fragment that starts where the last one starts replaces it (none of that
    fragment's entries was acknowledged); it never starts before it."""
    md = ledger().with_ensemble(5, ("b4:1", "b2:1", "b3:1"))
    again = md.with_ensemble(5, ("b4:1", "b5:1", "b3:1"))
    assert [f.first_entry_id for f in again.fragments] == [0, 5]
    assert again.ensemble == ("b4:1", "b5:1", "b3:1")
    with pytest.raises(InvariantViolation):
        md.with_ensemble(4, ENSEMBLE)


def test_state_transitions() -> None:
    """docs/protocol.md: OPEN -> IN_RECOVERY (recovery step 1) -> CLOSED with a last entry."""
    md = ledger()
    rec = md.in_recovery()
    assert rec.state is LedgerState.IN_RECOVERY and rec.last_entry_id is None
    closed = rec.closed(41, 1234)
    assert (closed.state, closed.last_entry_id, closed.length) == (LedgerState.CLOSED, 41, 1234)
    assert md.closed(-1, 0).last_entry_id == -1  # an empty closed ledger
    with pytest.raises(InvariantViolation):
        closed.closed(42, 1)
    with pytest.raises(InvariantViolation):
        rec.in_recovery()


def test_znode_body_round_trips_and_keeps_the_password_hash() -> None:
    """The znode body holds everything, including the password hash."""
    md = ledger().with_ensemble(3, ("b4:1", "b2:1", "b3:1")).in_recovery().closed(9, 99)
    body = md.to_json()
    assert LedgerMetadata.from_json(body) == md
    assert json.loads(body)["password_hash"] == md.password_hash


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b"[]", b'{"ledger_id": 1}', b'{"format_version": 99}'],
)
def test_malformed_znode_body_is_invalid_argument(body: bytes) -> None:
    """A znode body that is not valid metadata is refused with InvalidArgument."""
    with pytest.raises(InvalidArgument):
        LedgerMetadata.from_json(body)


def test_api_object_matches_api_md_and_never_shows_the_password() -> None:
    """docs/api.md ledger object: exactly its fields, without the password (hash)."""
    md = ledger(digest_type="hmac-sha256")
    doc = md.to_api()
    assert set(doc) == {
        "ledger_id",
        "state",
        "ensemble_size",
        "write_quorum",
        "ack_quorum",
        "digest",
        "last_entry_id",
        "length",
        "fragments",
        "metadata",
        "created_at",
        "closed_at",
    }
    assert doc["state"] == "OPEN" and doc["last_entry_id"] is None and doc["closed_at"] is None
    assert doc["digest"] == "hmac-sha256"
    assert doc["fragments"] == [{"first_entry_id": 0, "bookies": list(ENSEMBLE)}]
    assert "pbkdf2" not in json.dumps(doc)
    assert "pbkdf2" not in repr(md)


def test_the_write_that_closes_a_ledger_stamps_when() -> None:
    """``closed_at``: set once, on the CLOSED metadata (the store stamps its writes),
    kept by later changes and through the znode form."""
    md = ledger()
    assert md.stamped_closed(5_000) == md  # open: nothing to stamp
    closed = md.closed(9, 100).stamped_closed(5_000)
    assert closed.closed_at == 5_000 and closed.to_api()["closed_at"] == 5_000
    assert closed.stamped_closed(7_000).closed_at == 5_000
    assert LedgerMetadata.from_json(closed.to_json()) == closed
    assert "closed_at" not in json.loads(md.to_json())
    doc = json.loads(closed.to_json())
    doc["closed_at"] = -1
    with pytest.raises(InvalidArgument):
        LedgerMetadata.from_json(json.dumps(doc).encode())


# ---------------------------------------------------------------------- instances

INSTANCES = {"b1:1": "i-1", "b2:1": "i-2", "b3:1": "i-3"}


def test_fragments_record_instances_and_the_znode_round_trips_them() -> None:
    """Issue 7 item 1: each fragment records which instance of each bookie it was
    written to (parallel to its bookies); the znode body carries them per fragment and
    parses back to equal metadata, a later fragment's unknown ones included."""
    md = ledger(instances=INSTANCES).with_ensemble(4, ("b4:1", "b2:1", "b3:1"))
    assert md.fragments[0].instances == ("i-1", "i-2", "i-3")
    assert md.last_fragment.instances == (None, "i-2", "i-3")
    assert md.last_fragment.instance_of("b2:1") == "i-2"
    assert md.last_fragment.instance_of("b4:1") is None
    body = md.to_json()
    doc = json.loads(body)
    assert doc["fragments"][0]["instances"] == ["i-1", "i-2", "i-3"]
    assert doc["fragments"][1]["instances"] == [None, "i-2", "i-3"]
    assert LedgerMetadata.from_json(body) == md


def test_metadata_without_instances_round_trips_unchanged() -> None:
    """Metadata written before instances were recorded: no ``instances`` key, parsed as
    all unknown, and written back byte for byte as it was."""
    md = ledger()
    assert md.fragments[0].instances == (None, None, None)
    body = md.to_json()
    assert all("instances" not in f for f in json.loads(body)["fragments"])
    old = json.loads(body)
    assert LedgerMetadata.from_json(body).to_json() == body
    assert LedgerMetadata.from_json(json.dumps(old).encode()) == md


def test_the_api_object_never_shows_instances() -> None:
    """docs/api.md fixes the public ledger object: fragments are first_entry_id and bookies."""
    md = ledger(instances=INSTANCES).with_ensemble(4, ("b4:1", "b2:1", "b3:1"), {"b4:1": "x"})
    for fragment in md.to_api()["fragments"]:
        assert set(fragment) == {"first_entry_id", "bookies"}
    assert "i-1" not in json.dumps(md.to_api()) and "x" not in str(md.to_api()["fragments"])


@pytest.mark.parametrize("instances", [["i-1"], ["i-1", "", "i-3"], "i-1i-2i-3", [1, 2, 3]])
def test_malformed_instances_are_invalid_argument(instances: object) -> None:
    """One instance (a non-empty string or null) per bookie, in a list, or the body is
    rejected."""
    doc = json.loads(ledger().to_json())
    doc["fragments"][0]["instances"] = instances
    with pytest.raises(InvalidArgument):
        LedgerMetadata.from_json(json.dumps(doc).encode())


def test_replacing_a_bookie_records_the_copy_targets_instance() -> None:
    """Re-replication swaps a bookie: the new one gets ``new_instance`` (unknown when not
    given) at the old one's index; the others keep theirs."""
    md = ledger(instances=INSTANCES)
    swapped = md.replace_bookie(0, "b2:1", "b9:1", new_instance="i-9")
    assert swapped.fragments[0].bookies == ("b1:1", "b9:1", "b3:1")
    assert swapped.fragments[0].instances == ("i-1", "i-9", "i-3")
    assert md.replace_bookie(0, "b2:1", "b9:1").fragments[0].instances == ("i-1", None, "i-3")


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(1, 6)).filter(
        lambda s: s[0] >= s[1] >= s[2]
    ),
    starts=st.lists(st.integers(1, 40), max_size=4, unique=True),
)
def test_write_set_bookies_is_the_striped_write_set_of_the_entrys_fragment(sizes, starts):
    """``write_set_bookies`` answers entries of the last fragment from a cache; for every
    entry, of every fragment and past the last, it is still the definition: the Qw
    bookies ``quorum.write_set`` picks from the ensemble of the fragment holding it."""
    ensemble_size, write_quorum, ack_quorum = sizes
    fragments = [Fragment(0, tuple(f"b{i}:1" for i in range(ensemble_size)))]
    for n, first in enumerate(sorted(starts)):
        bookies = list(fragments[-1].bookies)
        bookies[n % ensemble_size] = f"n{n}:1"  # one bookie replaced per change
        fragments.append(Fragment(first, tuple(bookies)))
    md = LedgerMetadata(7, ensemble_size, write_quorum, ack_quorum, tuple(fragments))
    for entry_id in range(60):
        bookies = md.fragment_for(entry_id).bookies
        expected = tuple(
            bookies[i] for i in quorum.write_set(entry_id, ensemble_size, write_quorum)
        )
        assert md.write_set_bookies(entry_id) == expected


def test_ledgers_on_the_same_bookies_share_their_fragments_and_write_sets() -> None:
    """Ledgers created on the same bookies share one fragment list and one write-set
    table (the metadata is frozen; a gateway holds one per open ledger), and equal
    metadata still compares equal; other bookies, another Qw or an ensemble change get
    their own, with the right write sets; the tables stay bounded."""
    one = LedgerMetadata.new(1, ENSEMBLE, 2, 2, created_at=1)
    two = LedgerMetadata.new(2, ENSEMBLE, 2, 2, created_at=2)
    assert one.fragments is two.fragments and one._write_sets is two._write_sets
    assert LedgerMetadata.from_json(one.to_json()).fragments is one.fragments
    assert LedgerMetadata.from_json(one.to_json()) == one
    other_quorum = LedgerMetadata.new(3, ENSEMBLE, 3, 2)
    assert other_quorum.fragments is one.fragments
    assert other_quorum.write_set_bookies(1) == tuple(ENSEMBLE[i] for i in (1, 2, 0))
    assert one.write_set_bookies(1) == tuple(ENSEMBLE[i] for i in (1, 2))
    changed = one.with_ensemble(5, ["b9:1", *ENSEMBLE[1:]])
    assert changed.fragments is not one.fragments
    assert changed.write_set_bookies(5) == (ENSEMBLE[2], "b9:1")
    assert changed.write_set_bookies(1) == one.write_set_bookies(1)  # the first fragment's
    for i in range(metadata_module.SHARED_FRAGMENTS_MAX + 10):
        LedgerMetadata.new(i, [f"x{i}:1", "y:1", "z:1"], 2, 2)
    assert len(metadata_module._shared_fragments) <= metadata_module.SHARED_FRAGMENTS_MAX
    assert len(metadata_module._shared_write_sets) <= metadata_module.SHARED_FRAGMENTS_MAX
    # Full tables drop their oldest entries only: the recent ones are still shared.
    last = metadata_module.SHARED_FRAGMENTS_MAX + 9
    recent = LedgerMetadata.new(1, [f"x{last}:1", "y:1", "z:1"], 2, 2)
    again = LedgerMetadata.new(2, [f"x{last}:1", "y:1", "z:1"], 2, 2)
    assert again.fragments is recent.fragments
    assert len(metadata_module._shared_fragments) >= metadata_module.SHARED_FRAGMENTS_MAX - 1
