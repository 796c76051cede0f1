"""Field types of JSON request bodies that read JSON as JSON Schema does.

JSON Schema (and so every OpenAPI document) calls a number an integer when its
fraction is zero: ``63.0`` is the integer 63, ``63.5`` is not one. pydantic's strict
``int`` refuses ``63.0``, its lax ``int`` also takes ``"63"`` and ``true``; ``JsonInt``
takes JSON integers and integral JSON numbers, nothing else. Ids in paths and queries
stay canonical decimal (gateway/http/deps.py): those are text, not JSON numbers.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Strict


def integral_number(value: Any) -> Any:
    """A pydantic before-validator: a float with no fraction becomes that integer;
    anything else is left for the strict ``int`` check (which refuses ``63.5``, strings
    and booleans)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


JsonInt = Annotated[int, BeforeValidator(integral_number), Strict()]
"""An integer in a JSON body: a JSON integer or an integral number (``63.0``)."""
