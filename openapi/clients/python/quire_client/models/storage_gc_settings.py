from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="StorageGcSettings")


@_attrs_define
class StorageGcSettings:
    """
    Attributes:
        deletes_per_pass (int): ledgers one pass deletes at most
        grace_s (float): seconds between the two looks
        interval_s (float): seconds between passes (0: never)
    """

    deletes_per_pass: int
    grace_s: float
    interval_s: float
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        deletes_per_pass = self.deletes_per_pass

        grace_s = self.grace_s

        interval_s = self.interval_s

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "deletes_per_pass": deletes_per_pass,
                "grace_s": grace_s,
                "interval_s": interval_s,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        deletes_per_pass = d.pop("deletes_per_pass")

        grace_s = d.pop("grace_s")

        interval_s = d.pop("interval_s")

        storage_gc_settings = cls(
            deletes_per_pass=deletes_per_pass,
            grace_s=grace_s,
            interval_s=interval_s,
        )

        storage_gc_settings.additional_properties = d
        return storage_gc_settings

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
