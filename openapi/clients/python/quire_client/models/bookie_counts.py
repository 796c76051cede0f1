from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="BookieCounts")


@_attrs_define
class BookieCounts:
    """
    Attributes:
        readonly (int): registered bookies new ensembles may not choose: read-only, or decommissioning / decommissioned
            while still running
        unavailable (int): bookies with a cookie that are not registered (down), decommissioned ones left out
        writable (int): registered bookies new ensembles may choose
    """

    readonly: int
    unavailable: int
    writable: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        readonly = self.readonly

        unavailable = self.unavailable

        writable = self.writable

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "readonly": readonly,
                "unavailable": unavailable,
                "writable": writable,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        readonly = d.pop("readonly")

        unavailable = d.pop("unavailable")

        writable = d.pop("writable")

        bookie_counts = cls(
            readonly=readonly,
            unavailable=unavailable,
            writable=writable,
        )

        bookie_counts.additional_properties = d
        return bookie_counts

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
