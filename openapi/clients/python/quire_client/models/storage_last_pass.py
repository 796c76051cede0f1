from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="StorageLastPass")


@_attrs_define
class StorageLastPass:
    """
    Attributes:
        at (str): when the pass ended (ISO 8601, UTC)
        error (None | str): why it stopped early (a ZooKeeper error), or null
        freed_bytes (int):
        freed_ledgers (int):
        took_ms (int):
    """

    at: str
    error: None | str
    freed_bytes: int
    freed_ledgers: int
    took_ms: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        at = self.at

        error: None | str
        error = self.error

        freed_bytes = self.freed_bytes

        freed_ledgers = self.freed_ledgers

        took_ms = self.took_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "at": at,
                "error": error,
                "freed_bytes": freed_bytes,
                "freed_ledgers": freed_ledgers,
                "took_ms": took_ms,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        at = d.pop("at")

        def _parse_error(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        error = _parse_error(d.pop("error"))

        freed_bytes = d.pop("freed_bytes")

        freed_ledgers = d.pop("freed_ledgers")

        took_ms = d.pop("took_ms")

        storage_last_pass = cls(
            at=at,
            error=error,
            freed_bytes=freed_bytes,
            freed_ledgers=freed_ledgers,
            took_ms=took_ms,
        )

        storage_last_pass.additional_properties = d
        return storage_last_pass

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
