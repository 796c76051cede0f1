"""Durations and sizes as people write them on the command line (``quire log create
--max-age 7d --max-bytes 10GiB``), and ``none`` where a limit can be cleared."""

from __future__ import annotations

import re

import typer

_DURATION = re.compile(r"([0-9]+)(s|m|h|d|w)?")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_SIZE = re.compile(r"([0-9]+)(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)?", re.IGNORECASE)
_BYTES = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
}
NONE = "none"


def parse_duration_s(text: str, option: str) -> int:
    """``90``, ``90s``, ``15m``, ``12h``, ``7d``, ``2w`` -> whole seconds (>= 1)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or int(match.group(1)) == 0:
        raise typer.BadParameter(
            f"{text!r}: a positive whole number of seconds, or with a unit s, m, h, d, w (e.g. 7d)",
            param_hint=option,
        )
    return int(match.group(1)) * _SECONDS[match.group(2) or "s"]


def parse_size(text: str, option: str) -> int:
    """``4096``, ``64KiB``, ``10GiB``, ``1GB`` -> bytes (>= 1)."""
    match = _SIZE.fullmatch(text.strip())
    if match is None or int(match.group(1)) == 0:
        raise typer.BadParameter(
            f"{text!r}: a positive number of bytes, or with a unit KiB, MiB, GiB, TiB (or "
            "KB, MB, GB, TB)",
            param_hint=option,
        )
    return int(match.group(1)) * _BYTES[(match.group(2) or "b").lower()]


def parse_count(text: str, option: str) -> int:
    if not text.strip().isdigit() or int(text) == 0:
        raise typer.BadParameter(f"{text!r}: a positive whole number", param_hint=option)
    return int(text)
