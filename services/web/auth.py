"""Secrets compared in constant time."""

from __future__ import annotations

import hmac


def secret_matches(given: str | None, expected: str) -> bool:
    """Constant-time comparison of a presented secret with the expected one."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())
