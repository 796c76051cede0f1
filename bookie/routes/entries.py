"""The data path: batch add, single read, range read."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from bookie.fastpath import BodyTimeout, add_request
from bookie.models import (
    ADD_REQUEST_BODY,
    FRAMING_DESCRIPTION,
    SECRET_REFUSED,
    UNKNOWN_HERE,
    AddResult,
    EntryIdPath,
    LedgerIdPath,
    framed_response,
)
from bookie.node import BookieNode
from bookie.routes.deps import NodeDep, get_node
from bookie.storage import StoredEntry
from services.errors import (
    BookieReadOnly,
    EntryNotFound,
    InvalidArgument,
    LedgerNotFound,
    PayloadTooLarge,
)
from services.limits import ENSEMBLE_SIZE_MAX, ID_MAX, PAGE_BYTES_MAX, RANGE_ENTRIES_MAX
from services.web.errors import error_responses, explained, noted
from services.wire.framing import DIGEST_NAMES, MEDIA_TYPE, FramedRecord, encode, encode_stored

router = APIRouter(prefix="/v1", tags=["entries"])

LAST_ENTRY_HEADER = "X-Quire-Last-Entry-Id"


@router.post(
    "/entries",
    summary="Store entries (batch add, binary framing)",
    description=(
        "Stores framed records, possibly of several ledgers, durably (fsync unless the "
        "bookie runs with --no-journal-sync) before answering. A normal add to a fenced "
        "ledger is rejected per entry (ledger_fenced); a recovery add (flag bit 0) is "
        "accepted. Re-adding an entry with the same bytes is idempotent; different bytes "
        "for a stored entry are rejected per entry (entry_exists) and change nothing; a "
        "record whose crc32c digest or record checksum (flags bit 3: hmac-sha256 and none "
        "records) does not match is rejected alone (invalid_argument). A "
        "body that does not parse is refused whole; nothing is stored. A read-only "
        "bookie refuses requests holding any non-recovery record."
    ),
    response_model=AddResult,
    responses=error_responses(
        explained(InvalidArgument, "empty or malformed body, bad ids, digest length"),
        explained(PayloadTooLarge, "entry, record count or body over the limit"),
        explained(BookieReadOnly, "this bookie takes only recovery adds"),
        SECRET_REFUSED,
    ),
    openapi_extra=ADD_REQUEST_BODY,
)
async def add_entries(request: Request) -> Response:
    # Normally answered by bookie.fastpath.AddFastPath before routing; same code.
    node: BookieNode = await get_node(request)
    declared = request.headers.get("content-length")
    try:
        answer = await add_request(node, declared, request.stream(), request.scope)
    except BodyTimeout as exc:
        raise exc.as_error() from None
    return Response(answer, media_type="application/json")


def parse_residues(stride: int, residues: str | None) -> tuple[int, ...]:
    """The residues of a striped range read, sorted, or () for none (every entry);
    ``InvalidArgument`` for a list that is not distinct integers below ``stride``."""
    if not stride and residues is None:
        return ()
    if not stride or residues is None:
        raise InvalidArgument("stride and residues come together")
    try:
        wanted = sorted({int(part) for part in residues.split(",")})
    except ValueError:
        raise InvalidArgument(f"residues must be integers: {residues!r}") from None
    if not wanted or wanted[0] < 0 or wanted[-1] >= stride:
        raise InvalidArgument(f"residues must be in 0..{stride - 1}: {residues!r}")
    return () if len(wanted) == stride else tuple(wanted)


def _to_record(ledger_id: int, entry: StoredEntry) -> FramedRecord:
    return FramedRecord(
        ledger_id,
        entry.entry_id,
        entry.lac,
        entry.payload,
        entry.digest,
        False,
        DIGEST_NAMES[entry.digest_type],
        entry.length,
    )


@router.get(
    "/ledgers/{ledger_id}/entries/{entry_id}",
    summary="Read one entry",
    response_class=Response,
    responses={
        **framed_response("One framed record; the flags carry the digest type"),
        **error_responses(
            explained(InvalidArgument, "bad ids"),
            noted(LedgerNotFound, "unknown here"),
            EntryNotFound,
            SECRET_REFUSED,
        ),
    },
)
async def read_entry(ledger_id: LedgerIdPath, entry_id: EntryIdPath, node: NodeDep) -> Response:
    if ledger_id not in node.index:
        raise LedgerNotFound(f"ledger {ledger_id} is not stored on this bookie")
    reader = node.open_reader()
    started = time.perf_counter()
    entry = await asyncio.get_running_loop().run_in_executor(
        reader.executor, reader.read_entry, ledger_id, entry_id
    )
    node.metrics.read_latency.observe(time.perf_counter() - started)
    node.metrics.read_requests.inc()
    if entry is None:
        raise EntryNotFound(f"entry {entry_id} of ledger {ledger_id} is not stored here")
    node.metrics.reads.inc()
    return Response(encode([_to_record(ledger_id, entry)]), media_type=MEDIA_TYPE)


@router.get(
    "/ledgers/{ledger_id}/entries",
    summary="Read a range of entries",
    description=(
        "Framed records present in [from, to], ascending; missing ids are skipped. At most "
        f"max_entries (default and max {RANGE_ENTRIES_MAX}) records and max_bytes of payload "
        f"(default and max {PAGE_BYTES_MAX}; the first entry is always returned). Larger "
        "limits are clamped."
    ),
    response_class=Response,
    responses={
        **framed_response(
            FRAMING_DESCRIPTION,
            headers={
                LAST_ENTRY_HEADER: {
                    "description": "Last entry id this bookie stores for the ledger (-1: none)",
                    "schema": {"type": "integer"},
                }
            },
        ),
        **error_responses(
            explained(InvalidArgument, "bad ids or limits, from > to"), UNKNOWN_HERE, SECRET_REFUSED
        ),
    },
)
async def read_range(
    ledger_id: LedgerIdPath,
    node: NodeDep,
    from_: Annotated[
        int, Query(alias="from", ge=0, le=ID_MAX, description="First entry id (default 0)")
    ] = 0,
    to: Annotated[
        int, Query(ge=0, le=ID_MAX, description="Last entry id, inclusive (default: no bound)")
    ] = ID_MAX,
    max_entries: Annotated[
        int, Query(ge=1, le=ID_MAX, description="Most records to return")
    ] = RANGE_ENTRIES_MAX,
    max_bytes: Annotated[
        int, Query(ge=1, le=ID_MAX, description="Most payload bytes to return")
    ] = PAGE_BYTES_MAX,
    stride: Annotated[
        int,
        Query(
            ge=0,
            le=ENSEMBLE_SIZE_MAX,
            description="With residues: only entries whose id mod stride is one of them "
            "(a gateway asks each bookie of a striped ensemble for its share; 0: all)",
        ),
    ] = 0,
    residues: Annotated[
        str | None,
        Query(
            max_length=4 * ENSEMBLE_SIZE_MAX,
            description="Comma-separated residues, each below stride (with stride only)",
            examples=["0,2"],
        ),
    ] = None,
) -> Response:
    if from_ > to:
        raise InvalidArgument(f"from {from_} is greater than to {to}")
    wanted = parse_residues(stride, residues)
    if ledger_id not in node.index:
        raise LedgerNotFound(f"ledger {ledger_id} is not stored on this bookie")
    reader = node.open_reader()
    started = time.perf_counter()
    entries = await asyncio.get_running_loop().run_in_executor(
        reader.executor,
        reader.read_range,
        ledger_id,
        from_,
        to,
        min(max_entries, RANGE_ENTRIES_MAX),
        min(max_bytes, PAGE_BYTES_MAX),
        stride if wanted else 0,
        wanted,
    )
    node.metrics.read_latency.observe(time.perf_counter() - started)
    node.metrics.read_requests.inc()
    node.metrics.reads.inc(len(entries))
    body = encode_stored(ledger_id, entries)
    headers = {LAST_ENTRY_HEADER: str(node.index.last_entry_id(ledger_id))}
    return Response(body, media_type=MEDIA_TYPE, headers=headers)
