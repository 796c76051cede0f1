"""BookieNode's guards for requests that race the store's opening and closing."""

from __future__ import annotations

from pathlib import Path

import pytest

from bookie.metrics import BookieMetrics
from bookie.node import BookieNode
from bookie.storage import Reader
from services.errors import Unavailable
from services.settings import BookieSettings


def test_a_closed_store_answers_unavailable_not_a_crash(tmp_path: Path) -> None:
    """A read that passed ``check_open`` just before the stop began finds the readers
    gone: ``open_reader`` raises 503 ``unavailable`` (an AttributeError on None was a
    500 before), and hands the readers over while they are open."""
    node = BookieNode(BookieSettings(data_dir=tmp_path), BookieMetrics())
    with pytest.raises(Unavailable) as refused:
        node.open_reader()
    assert refused.value.http_status == 503
    assert "not serving data yet" in str(refused.value)
    reader = Reader(tmp_path)
    try:
        node.reader = reader
        assert node.open_reader() is reader
    finally:
        reader.close()
