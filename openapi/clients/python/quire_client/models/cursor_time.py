from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

T = TypeVar("T", bound="CursorTime")


@_attrs_define
class CursorTime:
    """
    Attributes:
        time (int | str): ms since the Unix epoch or RFC 3339
    """

    time: int | str

    def to_dict(self) -> dict[str, Any]:
        time: int | str
        time = self.time

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "time": time,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_time(data: object) -> int | str:
            return cast(int | str, data)

        time = _parse_time(d.pop("time"))

        cursor_time = cls(
            time=time,
        )

        return cursor_time
