"""One SIGHUP handler for every reload of a process (services/web/sighup.py): the TLS
contexts and the gateway's token file both reload on it, and a loop keeps only the last
handler set for a signal, so they register with ``on_sighup`` and are all called."""

from __future__ import annotations

import asyncio
import os
import signal

from services.web.sighup import on_sighup


async def _hup_and_settle() -> None:
    os.kill(os.getpid(), signal.SIGHUP)
    for _ in range(50):  # the loop's signal handler runs on a later turn
        await asyncio.sleep(0.01)


def test_every_registered_reload_runs_and_a_removed_one_no_more() -> None:
    async def main() -> list[str]:
        calls: list[str] = []
        stop_tls = on_sighup(lambda: calls.append("tls"))
        stop_tokens = on_sighup(lambda: calls.append("tokens"))
        await _hup_and_settle()
        stop_tls()
        await _hup_and_settle()
        stop_tokens()
        assert asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP) is False
        return calls

    assert asyncio.run(main()) == ["tls", "tokens", "tokens"]


def test_a_failing_reload_does_not_stop_the_others() -> None:
    async def main() -> list[str]:
        calls: list[str] = []

        def broken() -> None:
            raise RuntimeError("bad file")

        stops = [on_sighup(broken), on_sighup(lambda: calls.append("tokens"))]
        await _hup_and_settle()
        for stop in stops:
            stop()
        return calls

    assert asyncio.run(main()) == ["tokens"]
