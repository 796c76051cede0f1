from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="AckCursor")


@_attrs_define
class AckCursor:
    """Body of POST /v1/logs/{name}/cursors/{cursor}/ack.

    Attributes:
        position (str): LID:EID of the last record processed
    """

    position: str

    def to_dict(self) -> dict[str, Any]:
        position = self.position

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "position": position,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        position = d.pop("position")

        ack_cursor = cls(
            position=position,
        )

        return ack_cursor
