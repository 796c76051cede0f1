from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Fragment")


@_attrs_define
class Fragment:
    """
    Attributes:
        bookies (list[str]):
        first_entry_id (int):
    """

    bookies: list[str]
    first_entry_id: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        bookies = self.bookies

        first_entry_id = self.first_entry_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "bookies": bookies,
                "first_entry_id": first_entry_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        bookies = cast(list[str], d.pop("bookies"))

        first_entry_id = d.pop("first_entry_id")

        fragment = cls(
            bookies=bookies,
            first_entry_id=first_entry_id,
        )

        fragment.additional_properties = d
        return fragment

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
