"""Durations and sizes as the CLI takes them (services/cli/units.py)."""

from __future__ import annotations

import pytest
import typer

from services.cli.units import parse_count, parse_duration_s, parse_size


def test_durations_sizes_and_counts_read_as_people_write_them() -> None:
    assert parse_duration_s("90", "--max-age") == 90
    assert [parse_duration_s(t, "x") for t in ("90s", "15m", "12h", "7d", "2w")] == [
        90, 900, 43_200, 604_800, 1_209_600,
    ]  # fmt: skip
    assert parse_size("4096", "x") == 4096
    assert parse_size("64KiB", "x") == 65_536 and parse_size("10gib", "x") == 10 << 30
    assert parse_size("1GB", "x") == 10**9
    assert parse_count("1000", "x") == 1000


@pytest.mark.parametrize("text", ["", "0", "-1", "7x", "1.5h", "d", "0s"])
def test_a_bad_duration_is_a_usage_error_naming_the_option(text: str) -> None:
    with pytest.raises(typer.BadParameter) as caught:
        parse_duration_s(text, "--max-age")
    assert caught.value.param_hint == "--max-age"


@pytest.mark.parametrize("text", ["", "0", "-5", "1.5GiB", "10XB", "GiB"])
def test_a_bad_size_or_count_is_a_usage_error(text: str) -> None:
    with pytest.raises(typer.BadParameter):
        parse_size(text, "--max-bytes")
    with pytest.raises(typer.BadParameter):
        parse_count(text, "--max-records")
