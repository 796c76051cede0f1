"""Every add is counted once, by gateway.operations.submit_add (docs/operations.md
"Metrics"): its size when it is submitted, then its latency and entries when it is
acknowledged, or its error code when it fails, a refusal at admission included."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from gateway import operations as ops
from gateway.metrics import GatewayMetrics
from services.errors import LedgerFenced, Unavailable


class FakeRunner:
    """A write handle's runner whose adds end as the test says."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.futures: list[asyncio.Future[Any]] = []

    async def submit(self, payloads: tuple[bytes, ...]) -> asyncio.Future[Any]:
        if self.refuse:
            raise Unavailable("too many adds in flight; retry later")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.futures.append(future)
        return future


def value(metrics: GatewayMetrics, name: str, labels: dict[str, str] | None = None) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_an_add_is_counted_once_when_it_ends() -> None:
    """Its size when submitted; its entries once acknowledged; a failed add by its code."""
    metrics = GatewayMetrics()
    gw: Any = SimpleNamespace(metrics=metrics)
    runner: Any = FakeRunner()
    asyncio.run(adds(gw, runner, metrics))


async def adds(gw: Any, runner: Any, metrics: GatewayMetrics) -> None:
    added = await ops.submit_add(gw, runner, (b"a", b"b"))
    assert value(metrics, "quire_gateway_add_batch_entries_count") == 1
    assert value(metrics, "quire_gateway_entries_added_total") == 0
    outcome: Any = "outcome"
    loop = asyncio.get_running_loop()
    loop.call_soon(runner.futures[0].set_result, outcome)  # while the caller awaits it
    assert await added is outcome
    assert value(metrics, "quire_gateway_entries_added_total") == 2
    assert value(metrics, "quire_gateway_add_seconds_count") == 1

    failed = await ops.submit_add(gw, runner, (b"c",))
    loop.call_soon(runner.futures[1].set_exception, LedgerFenced())
    with pytest.raises(LedgerFenced):
        await failed
    assert value(metrics, "quire_gateway_add_errors_total", {"error": "ledger_fenced"}) == 1
    assert value(metrics, "quire_gateway_entries_added_total") == 2


def test_an_add_refused_at_admission_is_counted_as_failed() -> None:
    """A stream's add and a REST add refused by back-pressure count alike."""
    metrics = GatewayMetrics()
    gw: Any = SimpleNamespace(metrics=metrics)
    runner: Any = FakeRunner(refuse=True)
    with pytest.raises(Unavailable):
        asyncio.run(ops.submit_add(gw, runner, (b"a",)))
    assert value(metrics, "quire_gateway_add_errors_total", {"error": "unavailable"}) == 1
    assert value(metrics, "quire_gateway_add_batch_entries_count") == 1
