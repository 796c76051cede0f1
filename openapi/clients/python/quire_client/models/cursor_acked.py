from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="CursorAcked")


@_attrs_define
class CursorAcked:
    """
    Attributes:
        acked_at (int | None): ms since the Unix epoch of the last ack that moved it; null before any
        lag_bytes (int): their bytes, from ledger lengths (the log layer's envelope counted; estimated within a ledger
            from its mean entry size)
        lag_records (int): records after the position, to the log's end
        moved (bool): false: the position was at or before the cursor's, which did not move
        name (str):
        position (None | str): LID:EID of the last record acknowledged; null before any (a read through the cursor
            starts at the log's first record)
        skipped_at (int | None): ms since the Unix epoch when retention last removed records it had not acknowledged;
            null: never
        skipped_records (int): records retention removed before this cursor acknowledged them, in all (a read through it
            goes on at the log's first record)
    """

    acked_at: int | None
    lag_bytes: int
    lag_records: int
    moved: bool
    name: str
    position: None | str
    skipped_at: int | None
    skipped_records: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        acked_at: int | None
        acked_at = self.acked_at

        lag_bytes = self.lag_bytes

        lag_records = self.lag_records

        moved = self.moved

        name = self.name

        position: None | str
        position = self.position

        skipped_at: int | None
        skipped_at = self.skipped_at

        skipped_records = self.skipped_records

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "acked_at": acked_at,
                "lag_bytes": lag_bytes,
                "lag_records": lag_records,
                "moved": moved,
                "name": name,
                "position": position,
                "skipped_at": skipped_at,
                "skipped_records": skipped_records,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_acked_at(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        acked_at = _parse_acked_at(d.pop("acked_at"))

        lag_bytes = d.pop("lag_bytes")

        lag_records = d.pop("lag_records")

        moved = d.pop("moved")

        name = d.pop("name")

        def _parse_position(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        position = _parse_position(d.pop("position"))

        def _parse_skipped_at(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        skipped_at = _parse_skipped_at(d.pop("skipped_at"))

        skipped_records = d.pop("skipped_records")

        cursor_acked = cls(
            acked_at=acked_at,
            lag_bytes=lag_bytes,
            lag_records=lag_records,
            moved=moved,
            name=name,
            position=position,
            skipped_at=skipped_at,
            skipped_records=skipped_records,
        )

        cursor_acked.additional_properties = d
        return cursor_acked

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
