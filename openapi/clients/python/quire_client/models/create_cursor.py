from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.create_cursor_start_type_1 import CreateCursorStartType1


T = TypeVar("T", bound="CreateCursor")


@_attrs_define
class CreateCursor:
    """Optional body of PUT /v1/logs/{name}/cursors/{cursor}.

    Attributes:
        start (CreateCursorStartType1 | str | Unset): "earliest" (before the first record), "latest" (at the last
            record), "LID:EID" (at that record) or {"time": T} (at the record before the first stamped >= T) Default:
            'latest'.
    """

    start: CreateCursorStartType1 | str | Unset = "latest"

    def to_dict(self) -> dict[str, Any]:
        from ..models.create_cursor_start_type_1 import CreateCursorStartType1  # noqa: PLC0415

        start: dict[str, Any] | str | Unset
        if isinstance(self.start, Unset):
            start = UNSET
        elif isinstance(self.start, CreateCursorStartType1):
            start = self.start.to_dict()
        else:
            start = self.start

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if start is not UNSET:
            field_dict["start"] = start

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.create_cursor_start_type_1 import CreateCursorStartType1  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_start(data: object) -> CreateCursorStartType1 | str | Unset:
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                start_type_1 = CreateCursorStartType1.from_dict(data)

                return start_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(CreateCursorStartType1 | str | Unset, data)

        start = _parse_start(d.pop("start", UNSET))

        create_cursor = cls(
            start=start,
        )

        return create_cursor
