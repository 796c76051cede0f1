"""One SIGHUP handler for every reload of a process (services/web/sighup.py): the TLS
contexts and the gateway's token file both reload on it, and a loop keeps only the last
handler set for a signal, so they register with ``on_sighup`` and are all called."""

from __future__ import annotations

import asyncio
import os
import signal

from services.web.sighup import on_sighup


async def _hup(done: asyncio.Event) -> None:
    """SIGHUP this process and wait until ``done`` is set by the last reload to run."""
    done.clear()
    os.kill(os.getpid(), signal.SIGHUP)
    await asyncio.wait_for(done.wait(), 5.0)


def test_every_registered_reload_runs_and_a_removed_one_no_more() -> None:
    async def main() -> list[str]:
        calls: list[str] = []
        done = asyncio.Event()

        def tokens() -> None:
            calls.append("tokens")
            done.set()

        stop_tls = on_sighup(lambda: calls.append("tls"))
        stop_tokens = on_sighup(tokens)
        await _hup(done)
        stop_tls()
        await _hup(done)  # reloads run in order: tls, had it stayed, would be first
        stop_tokens()
        assert asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP) is False
        return calls

    assert asyncio.run(main()) == ["tls", "tokens", "tokens"]


def test_a_failing_reload_does_not_stop_the_others() -> None:
    async def main() -> list[str]:
        calls: list[str] = []
        done = asyncio.Event()

        def broken() -> None:
            raise RuntimeError("bad file")

        def tokens() -> None:
            calls.append("tokens")
            done.set()

        stops = [on_sighup(broken), on_sighup(tokens)]
        await _hup(done)
        for stop in stops:
            stop()
        return calls

    assert asyncio.run(main()) == ["tokens"]
