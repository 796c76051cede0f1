"""Ledger passwords: stored as a salted hash, checked in constant time, never logged.

PBKDF2 is slow on purpose (tens of milliseconds of CPU, benchmarks/README.md, "Measured
choices"), so a check must not run on the event loop: every other request would wait
behind it, and a few clients sending wrong passwords would starve the gateway.
``PasswordChecker`` therefore

- hashes in a small worker pool (``hashlib`` releases the GIL while it hashes), with a
  bound on the checks in progress (503 ``unavailable`` past it);
- remembers verified passwords per ledger and per client address (bounded, least
  recently used first out), so a writer that presents its password on every add pays
  for one hash; a password verified for one address is never an answer for another,
  which would give a blocked guesser an oracle at the speed of a dictionary lookup;
- limits wrong passwords per client address with a token bucket: each wrong password
  takes a token, tokens come back at a steady rate, and an address with none left gets
  401 at once, without hashing, until one came back. A password this address verified
  before still works then, so a writer is not locked out by a guesser that shares its
  address.

The client address comes from ``client_address``, which the routes set per request
(``gateway/http/deps.py``), so the operations need not carry it.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar

from gateway.limits import (
    CLIENTS_TRACKED_MAX,
    FAILED_CHECKS_BURST,
    FAILED_CHECKS_REFILL_PER_S,
    HASH_WORKERS,
    HASHES_IN_PROGRESS_MAX,
    VERIFIED_CACHE_MAX,
)
from services.errors import Unauthorized, Unavailable

_ITERATIONS = 100_000
_SCHEME = "pbkdf2-sha256"


WRONG_PASSWORD = "missing or wrong ledger password (X-Ledger-Password)"
SLOW_DOWN = (
    "too many wrong ledger passwords from this address: slow down "
    f"(one more attempt every {1 / FAILED_CHECKS_REFILL_PER_S:g} s)"
)

client_address: ContextVar[str | None] = ContextVar("ledger_password_client", default=None)


def hash_password(password: str) -> str:
    salt = os.urandom(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, _ITERATIONS)
    return "$".join(
        [
            _SCHEME,
            str(_ITERATIONS),
            base64.b64encode(salt).decode(),
            base64.b64encode(digest).decode(),
        ]
    )


def password_matches(password: str | None, stored: str) -> bool:
    """Whether ``password`` matches the stored hash (hashes every time: not for the loop)."""
    if password is None:
        return False
    try:
        scheme, iterations, salt_b64, digest_b64 = stored.split("$")
    except ValueError:
        return False
    if scheme != _SCHEME:
        return False
    digest = hashlib.pbkdf2_hmac(
        "sha256", password.encode(), base64.b64decode(salt_b64), int(iterations)
    )
    return hmac.compare_digest(digest, base64.b64decode(digest_b64))


class FailureBuckets:
    """A token bucket of wrong-password attempts per client address (bounded table)."""

    def __init__(
        self,
        burst: int = FAILED_CHECKS_BURST,
        refill_per_s: float = FAILED_CHECKS_REFILL_PER_S,
        clients_max: int = CLIENTS_TRACKED_MAX,
    ) -> None:
        self.burst = burst
        self.refill_per_s = refill_per_s
        self.clients_max = clients_max
        self._buckets: OrderedDict[str | None, tuple[float, float]] = OrderedDict()

    def tokens(self, client: str | None, now: float) -> float:
        entry = self._buckets.get(client)
        if entry is None:
            return float(self.burst)
        tokens, at = entry
        return min(float(self.burst), tokens + (now - at) * self.refill_per_s)

    def allows(self, client: str | None, now: float) -> bool:
        return self.tokens(client, now) >= 1.0

    def failed(self, client: str | None, now: float) -> None:
        self._buckets[client] = (max(0.0, self.tokens(client, now) - 1.0), now)
        self._buckets.move_to_end(client)
        while len(self._buckets) > self.clients_max:
            self._buckets.popitem(last=False)


class PasswordChecker:
    """Checks ledger passwords off the event loop; see the module docstring."""

    def __init__(
        self,
        matches: Callable[[str, str], bool] = password_matches,
        clock: Callable[[], float] = time.monotonic,
        workers: int = HASH_WORKERS,
        in_progress_max: int = HASHES_IN_PROGRESS_MAX,
        verified_max: int = VERIFIED_CACHE_MAX,
        failures: FailureBuckets | None = None,
    ) -> None:
        self._matches = matches
        self._clock = clock
        self._workers = workers
        self._executor: ThreadPoolExecutor | None = None
        self._in_progress = 0
        self._in_progress_max = in_progress_max
        self._verified: OrderedDict[tuple[str, str | None, bytes], None] = OrderedDict()
        self._verified_max = verified_max
        self.failures = failures or FailureBuckets()

    async def check(self, password: str | None, stored: str | None, client: str | None) -> None:
        """Return when the ledger has no password or ``password`` is its password; raise
        ``Unauthorized`` otherwise (at once when ``client`` has no attempts left), or
        ``Unavailable`` when too many checks are in progress."""
        if stored is None:
            return
        if password is None:
            raise Unauthorized(WRONG_PASSWORD)
        # The cache holds a digest of the password, not the password itself.
        key = (stored, client, hashlib.sha256(password.encode()).digest())
        if key in self._verified:
            self._verified.move_to_end(key)
            return
        if not self.failures.allows(client, self._clock()):
            raise Unauthorized(SLOW_DOWN)
        if self._in_progress >= self._in_progress_max:
            raise Unavailable("too many ledger password checks in progress; retry shortly")
        self._in_progress += 1
        try:
            loop = asyncio.get_running_loop()
            ok = await loop.run_in_executor(self._pool(), self._matches, password, stored)
        finally:
            self._in_progress -= 1
        if not ok:
            self.failures.failed(client, self._clock())
            raise Unauthorized(WRONG_PASSWORD)
        self._verified[key] = None
        while len(self._verified) > self._verified_max:
            self._verified.popitem(last=False)

    async def hash(self, password: str) -> str:
        """``hash_password`` in the worker pool (a new ledger's password)."""
        if self._in_progress >= self._in_progress_max:
            raise Unavailable("too many ledger password checks in progress; retry shortly")
        self._in_progress += 1
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._pool(), hash_password, password)
        finally:
            self._in_progress -= 1

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self._workers, thread_name_prefix="password")
        return self._executor


_checker = PasswordChecker()


async def new_password_hash(password: str) -> str:
    """The stored form of a new ledger's password, hashed off the event loop."""
    return await _checker.hash(password)


async def check_password(password: str | None, stored: str | None) -> None:
    """Raise ``Unauthorized`` unless the ledger has no password or ``password`` matches it
    (for the client of the current request, ``client_address``)."""
    await _checker.check(password, stored, client_address.get())
