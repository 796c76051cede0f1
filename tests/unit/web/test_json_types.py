"""Integers in JSON bodies are read as JSON Schema reads them (services/web/json_types.py,
issue 12's fuzz finding): ``63.0`` is the integer 63 in every body model of the gateway
and the bookie, while ``63.5``, ``"63"`` and ``true`` stay refused."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from bookie.models import LacBatch, LacUpdate, StoredBatch
from gateway.ledgers.schemas import CreateLedger
from gateway.logs.schemas import AttachLedgers, CreateLog
from services.limits import ID_MAX
from services.web.json_types import JsonInt

NOT_INTEGERS: list[Any] = [1.5, "1", True, None, [1], {"n": 1}, 1e-300]


class One(BaseModel):
    n: JsonInt


@pytest.mark.parametrize("value", [63, 63.0, -1.0, 0.0, -0.0, 2.0**62])
def test_integral_numbers_are_integers(value: float) -> None:
    """A JSON integer or a number with no fraction is that integer, typed int."""
    n = One.model_validate({"n": value}).n
    assert type(n) is int and n == value


@pytest.mark.parametrize("value", NOT_INTEGERS)
def test_anything_else_is_refused(value: Any) -> None:
    """A fraction, a string, a boolean, null or a container is not an integer."""
    with pytest.raises(ValidationError):
        One.model_validate({"n": value})


def test_the_schema_still_says_integer() -> None:
    """The OpenAPI/JSON schema of a JsonInt field is a plain integer."""
    assert One.model_json_schema()["properties"]["n"]["type"] == "integer"


# (model, a body with integers written as integral numbers)
BODIES: list[tuple[type[BaseModel], dict[str, Any]]] = [
    (CreateLedger, {"ensemble_size": 1.0, "write_quorum": 1.0, "ack_quorum": 1.0}),
    (CreateLog, {"ensemble_size": 2.0, "write_quorum": 2.0, "ack_quorum": 1.0}),
    (AttachLedgers, {"ledgers": [3.0, 4], "commit": {"id": "c", "sequence": 5.0}}),
    (LacUpdate, {"lac": 7.0}),
    (LacBatch, {"lacs": [{"ledger_id": 3.0, "lac": -1.0}]}),
    (StoredBatch, {"ledger_ids": [3.0, 9]}),
]


def _integers(value: Any) -> list[Any]:
    if isinstance(value, BaseModel):
        return _integers(value.model_dump())
    if isinstance(value, dict):
        return [n for v in value.values() for n in _integers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _integers(v)]
    return [value] if isinstance(value, int | float) and not isinstance(value, bool) else []


@pytest.mark.parametrize(("model", "body"), BODIES, ids=[m.__name__ for m, _ in BODIES])
def test_every_body_takes_integral_numbers(model: type[BaseModel], body: dict[str, Any]) -> None:
    """Each body model of the API reads 1.0 as 1: every number it holds is an int."""
    parsed = model.model_validate(body)
    numbers = _integers(parsed)
    assert numbers and all(type(n) is int for n in numbers), numbers


@pytest.mark.parametrize(
    ("model", "body"),
    [
        (CreateLedger, {"ensemble_size": 1.5}),
        (CreateLedger, {"ensemble_size": "3"}),
        (CreateLedger, {"ensemble_size": True}),
        (CreateLog, {"ensemble_size": 2.5}),
        (CreateLog, {"ensemble_size": "3"}),
        (CreateLog, {"ack_quorum": True}),
        (AttachLedgers, {"ledgers": [1.5]}),
        (AttachLedgers, {"ledgers": ["1"]}),
        (AttachLedgers, {"ledgers": [-1]}),
        (AttachLedgers, {"ledgers": [float(2**64)]}),
        (AttachLedgers, {"ledgers": [1], "commit": {"id": "c", "sequence": 0.5}}),
        (LacUpdate, {"lac": 1.5}),
        (LacUpdate, {"lac": float(ID_MAX)}),  # 2^63: one more than any id
        (LacBatch, {"lacs": [{"ledger_id": "3", "lac": 1}]}),
        (StoredBatch, {"ledger_ids": [True]}),
    ],
)
def test_bodies_still_refuse_non_integers(model: type[BaseModel], body: dict[str, Any]) -> None:
    """A fraction, a numeric string, a boolean or an out-of-range integral number fails."""
    with pytest.raises(ValidationError):
        model.model_validate(body)
