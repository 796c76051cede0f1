"""Ledger metadata written straight into ZooKeeper, for the benchmarks that need many
ledgers fast: benchmarks/rereplication.py (a full audit of 100,000) and
benchmarks/scale.py (a curve up to a million). The ledgers are CLOSED and empty, so an
audit checks their metadata and bookies without reading an entry."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient, TransactionRequest

from services.protocol.metadata import LedgerMetadata
from services.zk import paths as zkpaths

# Ids far from the gateway's, so written ledgers never meet made ones.
FIRST_WRITTEN_ID = 1 << 40
# Creates per ZooKeeper multi (one transaction: one request and one log write for all
# of them, about 200 KB, under ZooKeeper's 1 MB request limit), multis in flight at once
# (kazoo's asynchronous API), and a progress line every so many ledgers.
CREATES_PER_MULTI = 500
MULTIS_IN_FLIGHT = 8
PROGRESS_EVERY = 50_000
CREATE_TIMEOUT_S = 120.0


def write_closed_ledgers(
    zk: KazooClient, first: int, count: int, bookies: Sequence[str], progress: bool = True
) -> None:
    """The metadata of ``count`` empty CLOSED ledgers with ids ``first``..., E=3 Qw=3
    Qa=2 on ``bookies`` in turn: each leaf znode of the id hierarchy made once, then its
    ledgers created ``CREATES_PER_MULTI`` to a multi, ``MULTIS_IN_FLIGHT`` multis at a
    time (a multi never crosses a leaf, whose parent must exist before it)."""
    in_flight: list[Any] = []
    made_parents: set[str] = set()
    multi: TransactionRequest | None = None
    multi_parent = ""
    in_multi = 0

    def send() -> None:
        nonlocal multi, in_multi
        if multi is not None and in_multi:
            in_flight.append(multi.commit_async())
        multi, in_multi = None, 0
        if len(in_flight) >= MULTIS_IN_FLIGHT:
            wait()

    def wait() -> None:
        for result in in_flight:
            for answer in result.get(CREATE_TIMEOUT_S):
                if isinstance(answer, Exception):
                    raise answer
        in_flight.clear()

    for i in range(count):
        lid = first + i
        path = zkpaths.ledger(lid)
        parent = path.rsplit("/", 1)[0]
        if parent != multi_parent or in_multi >= CREATES_PER_MULTI:
            send()
            multi_parent = parent
        if parent not in made_parents:
            wait()
            zk.ensure_path(parent)
            made_parents.add(parent)
        if multi is None:
            multi = zk.transaction()
        ensemble = [bookies[(i + k) % len(bookies)] for k in range(3)]
        multi.create(path, LedgerMetadata.new(lid, ensemble, 3, 2).closed(-1, 0).to_json())
        in_multi += 1
        if progress and (i + 1) % PROGRESS_EVERY == 0:
            print(f"  ledgers' metadata: {i + 1}/{count}", file=sys.stderr, flush=True)
    send()
    wait()
