"""Ledger passwords: stored as a salted hash, checked in constant time, never logged."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import os

from services.errors import Unauthorized

_ITERATIONS = 100_000
_SCHEME = "pbkdf2-sha256"
_VERIFIED_CACHE_MAX = 4096


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
    if password is None:
        return False
    return _verify(password, stored)


@functools.lru_cache(maxsize=_VERIFIED_CACHE_MAX)
def _verify(password: str, stored: str) -> bool:
    """PBKDF2 is slow on purpose; a ledger's writer presents its password on every add,
    so verified (password, hash) pairs are cached in memory (never written anywhere)."""
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


def check_password(password: str | None, stored: str | None) -> None:
    """Raise ``Unauthorized`` unless the ledger has no password or ``password`` matches it."""
    if stored is None:
        return
    if not password_matches(password, stored):
        raise Unauthorized("missing or wrong ledger password (X-Ledger-Password)")
