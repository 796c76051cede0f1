from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="MisplacedLedger")


@_attrs_define
class MisplacedLedger:
    """
    Attributes:
        fragments (list[int]): the first entry ids of its fragments whose write quorums span too few racks
        ledger_id (int):
        movable (bool): a move to a bookie on another rack can fix a settled one: the ledger is marked for it, and a
            replication worker moves it
    """

    fragments: list[int]
    ledger_id: int
    movable: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        fragments = self.fragments

        ledger_id = self.ledger_id

        movable = self.movable

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "fragments": fragments,
                "ledger_id": ledger_id,
                "movable": movable,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        fragments = cast(list[int], d.pop("fragments"))

        ledger_id = d.pop("ledger_id")

        movable = d.pop("movable")

        misplaced_ledger = cls(
            fragments=fragments,
            ledger_id=ledger_id,
            movable=movable,
        )

        misplaced_ledger.additional_properties = d
        return misplaced_ledger

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
