from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.under_replicated_ledger import UnderReplicatedLedger


T = TypeVar("T", bound="UnderReplicatedList")


@_attrs_define
class UnderReplicatedList:
    """
    Attributes:
        ledgers (list[UnderReplicatedLedger]): in ledger id order
        next_ (int | None): pass as ?after= for the next page; null on the last page
    """

    ledgers: list[UnderReplicatedLedger]
    next_: int | None
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        ledgers = []
        for ledgers_item_data in self.ledgers:
            ledgers_item = ledgers_item_data.to_dict()
            ledgers.append(ledgers_item)

        next_: int | None
        next_ = self.next_

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "ledgers": ledgers,
                "next": next_,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.under_replicated_ledger import UnderReplicatedLedger  # noqa: PLC0415

        d = dict(src_dict)
        ledgers = []
        _ledgers = d.pop("ledgers")
        for ledgers_item_data in _ledgers:
            ledgers_item = UnderReplicatedLedger.from_dict(ledgers_item_data)

            ledgers.append(ledgers_item)

        def _parse_next_(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        next_ = _parse_next_(d.pop("next"))

        under_replicated_list = cls(
            ledgers=ledgers,
            next_=next_,
        )

        under_replicated_list.additional_properties = d
        return under_replicated_list

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
