"""Ledger password checks (gateway/passwords.py ``PasswordChecker``): the hash runs off
the event loop, verified passwords are remembered per ledger and client, and a client
that sent too many wrong passwords is refused at once, without hashing, until its
attempts come back; a password it verified before still works meanwhile."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from gateway.passwords import (
    SLOW_DOWN,
    WRONG_PASSWORD,
    FailureBuckets,
    PasswordChecker,
    hash_password,
    password_matches,
)
from services.errors import Unauthorized, Unavailable

STORED = "stored-hash-of-right"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Matcher:
    """A stand-in for PBKDF2: counts calls, records the thread, may take its time."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.calls = 0
        self.delay_s = delay_s
        self.threads: set[int] = set()

    def __call__(self, password: str, stored: str) -> bool:
        self.calls += 1
        self.threads.add(threading.get_ident())
        time.sleep(self.delay_s)
        return stored == STORED and password == "right"


def _checker(matcher: Matcher, clock: Clock, burst: int = 3, refill: float = 1.0):  # type: ignore[no-untyped-def]
    return PasswordChecker(matcher, clock, failures=FailureBuckets(burst, refill))


async def _refused(checker: PasswordChecker, password: str | None, client: str) -> str:
    with pytest.raises(Unauthorized) as info:
        await checker.check(password, STORED, client)
    return info.value.message


def test_the_hash_runs_off_the_event_loop() -> None:
    """While a slow hash runs, the loop keeps running other tasks."""
    matcher = Matcher(delay_s=0.3)
    checker = _checker(matcher, Clock())

    async def main() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        await checker.check("right", STORED, "a")
        task.cancel()
        assert threading.get_ident() not in matcher.threads
        return ticks

    assert asyncio.run(main()) >= 5


def test_verified_passwords_are_remembered_per_client() -> None:
    """The right password is hashed once per client; another client pays its own hash,
    and no ledger password means no check at all."""
    matcher, clock = Matcher(), Clock()
    checker = _checker(matcher, clock)

    async def main() -> None:
        for _ in range(5):
            await checker.check("right", STORED, "a")
        assert matcher.calls == 1
        await checker.check("right", STORED, "b")
        assert matcher.calls == 2
        await checker.check(None, None, "a")
        await checker.check("anything", None, "a")
        assert matcher.calls == 2

    asyncio.run(main())


def test_a_client_with_too_many_wrong_passwords_is_refused_without_hashing() -> None:
    """After `burst` wrong passwords the client gets 401 'slow down' at once (no hash),
    other clients are unaffected, a password this client verified before still works,
    and one attempt comes back per 1/refill seconds."""
    matcher, clock = Matcher(), Clock()
    checker = _checker(matcher, clock, burst=3, refill=0.5)

    async def main() -> None:
        await checker.check("right", STORED, "a")  # verified before the guessing
        for _ in range(3):
            assert await _refused(checker, "wrong", "a") == WRONG_PASSWORD
        assert matcher.calls == 4
        for guess in ("wrong", "right!", "guess"):
            assert await _refused(checker, guess, "a") == SLOW_DOWN
        assert matcher.calls == 4
        await checker.check("right", STORED, "a")  # remembered: no hash, allowed
        assert await _refused(checker, "wrong", "b") == WRONG_PASSWORD  # b has its own
        assert matcher.calls == 5
        assert await _refused(checker, None, "a") == WRONG_PASSWORD
        clock.now += 1.9
        assert await _refused(checker, "wrong", "a") == SLOW_DOWN
        clock.now += 0.1  # one attempt back after 2 s
        assert await _refused(checker, "wrong", "a") == WRONG_PASSWORD
        assert await _refused(checker, "wrong", "a") == SLOW_DOWN
        assert matcher.calls == 6

    asyncio.run(main())


def test_a_blocked_client_cannot_use_another_clients_verified_password() -> None:
    """The cache is no oracle: a password verified by client b is hashed (or refused)
    for client a like any other guess."""
    matcher, clock = Matcher(), Clock()
    checker = _checker(matcher, clock, burst=1)

    async def main() -> None:
        await checker.check("right", STORED, "b")
        assert await _refused(checker, "wrong", "a") == WRONG_PASSWORD
        assert await _refused(checker, "right", "a") == SLOW_DOWN
        assert matcher.calls == 2

    asyncio.run(main())


def test_checks_in_progress_are_bounded() -> None:
    """Past HASHES_IN_PROGRESS_MAX concurrent hashes a check is 503 unavailable."""
    matcher = Matcher(delay_s=0.2)
    checker = PasswordChecker(matcher, Clock(), workers=2, in_progress_max=2)

    async def main() -> list[BaseException | None]:
        return await asyncio.gather(
            *(checker.check("right", STORED, f"c{i}") for i in range(3)), return_exceptions=True
        )

    results = asyncio.run(main())
    assert results[:2] == [None, None]
    assert isinstance(results[2], Unavailable)


def test_the_failure_table_is_bounded() -> None:
    """The table of clients forgets the least recently failed beyond its bound."""
    buckets = FailureBuckets(burst=1, refill_per_s=0.0, clients_max=3)
    for client in ("a", "b", "c", "d"):
        buckets.failed(client, 0.0)
    assert buckets.allows("a", 0.0)  # forgotten
    assert not any(buckets.allows(c, 0.0) for c in ("b", "c", "d"))


def test_password_hashes_are_real_pbkdf2() -> None:
    """The stored form verifies the right password only."""
    stored = hash_password("s3cret")
    assert password_matches("s3cret", stored) and not password_matches("s3cret!", stored)
