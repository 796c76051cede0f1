"""The stamps a log writer gives (gateway/logs/writer.py; services/protocol/log_append.py
"Stamps"), in process: the real ``LogWriter`` over fake bookies and an in-memory ledger
store (tests/unit/ledger_client/fakes.py). Stamps never go backwards in log order: not
when the gateway's clock steps back, and not when the role goes to a gateway whose
clock is behind (its stamps start at the log's last one)."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from gateway.logs import writer as writer_module
from gateway.logs.writers import serve_logs
from gateway.metrics import GatewayMetrics
from gateway.service import Gateway
from services.ledger_client.runners import read as reads
from services.protocol import log_records
from services.protocol.logs import LogMetadata
from services.protocol.metadata import LedgerState
from services.protocol.reads import digest_key
from services.settings import GatewaySettings
from services.zk.log_store import LogStore
from tests.unit.gateway.test_stream_log_order import POOL, HeldLogs
from tests.unit.ledger_client.fakes import FakeBookies, FakeLedgerStore, make_context


async def stamps_of(gw: Gateway, ledger_ids: list[int]) -> list[int | None]:
    """Every entry's stamp, in log order (each ledger read up to its last entry)."""
    out: list[int | None] = []
    for lid in ledger_ids:
        metadata = (await gw.ctx.ledgers.get(lid)).metadata
        last = metadata.last_entry_id
        if last is None or last < 0:
            continue
        page = await reads.read_page(gw.ctx, metadata, 0, last, digest_key(metadata, None))
        out += [log_records.decode(data).time_ms for _, data in page.entries]
    return out


def test_stamps_never_go_backwards_across_a_clock_step_and_a_hand_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Gateway A appends while its clock reads 5,000 then steps back to 4,000 (its stamps
    stay 5,000); gateway B, whose clock reads 1,000, takes the role: its appends are
    stamped 5,000 (the log's last stamp), then follow its clock once it passes that."""
    clock = {"now": 5_000}
    monkeypatch.setattr(writer_module, "wall_ms", lambda: clock["now"])

    async def body() -> None:
        bookies, ledgers = FakeBookies(POOL), FakeLedgerStore()
        a = Gateway.build(GatewaySettings(), GatewayMetrics(), make_context(bookies, ledgers))
        b = Gateway.build(GatewaySettings(), GatewayMetrics(), make_context(bookies, ledgers))
        logs = HeldLogs(LogMetadata("s"))
        serve_logs(a, cast(LogStore, logs))
        serve_logs(b, cast(LogStore, logs))

        on_a = await a.logs.acquire("s")
        await on_a.append([b"a0", b"a1"], None)
        clock["now"] = 4_000  # A's clock steps back
        await on_a.append([b"a2"], None)

        clock["now"] = 1_000  # B's clock is behind A's
        on_b = await b.logs.acquire("s")
        await on_b.append([b"b0"], "k")
        clock["now"] = 6_000
        await on_b.append([b"b1", b"b2"], None)
        rolled_out = on_b.ledger_id
        await on_b.roll()
        await closed(b, rolled_out)  # the roll closes it after its CAS

        assert await stamps_of(b, list(logs.current.log.ledgers)) == [
            5_000, 5_000, 5_000, 5_000, 6_000, 6_000,
        ]  # fmt: skip
        await a.logs.aclose()
        await b.logs.aclose()

    asyncio.run(body())


async def closed(gw: Gateway, ledger_id: int, deadline_s: float = 5.0) -> None:
    """Until ``ledger_id`` is CLOSED in the ledger store (polled, with a deadline)."""
    end = asyncio.get_running_loop().time() + deadline_s
    while (await gw.ctx.ledgers.get(ledger_id)).metadata.state is not LedgerState.CLOSED:
        assert asyncio.get_running_loop().time() < end, f"ledger {ledger_id} never closed"
        await asyncio.sleep(0.01)
