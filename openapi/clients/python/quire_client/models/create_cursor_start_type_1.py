from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

T = TypeVar("T", bound="CreateCursorStartType1")


@_attrs_define
class CreateCursorStartType1:
    """
    Attributes:
        time (datetime.datetime | int | str):
    """

    time: datetime.datetime | int | str

    def to_dict(self) -> dict[str, Any]:
        time: int | str
        if isinstance(self.time, datetime.datetime):
            time = self.time.isoformat()
        else:
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

        def _parse_time(data: object) -> datetime.datetime | int | str:
            try:
                if not isinstance(data, str):
                    raise TypeError()
                time_type_2 = datetime.datetime.fromisoformat(data)

                return time_type_2
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | int | str, data)

        time = _parse_time(d.pop("time"))

        create_cursor_start_type_1 = cls(
            time=time,
        )

        return create_cursor_start_type_1
