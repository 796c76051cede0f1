from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.record_model import RecordModel


T = TypeVar("T", bound="RecordPage")


@_attrs_define
class RecordPage:
    """
    Attributes:
        caught_up (bool): the read reached what is readable now
        next_ (None | str): LID:EID to read from next (the same `from` when nothing was read); null only when the log
            has no ledger yet and no `from` was given
        records (list[RecordModel]):
    """

    caught_up: bool
    next_: None | str
    records: list[RecordModel]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        caught_up = self.caught_up

        next_: None | str
        next_ = self.next_

        records = []
        for records_item_data in self.records:
            records_item = records_item_data.to_dict()
            records.append(records_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "caught_up": caught_up,
                "next": next_,
                "records": records,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.record_model import RecordModel  # noqa: PLC0415

        d = dict(src_dict)
        caught_up = d.pop("caught_up")

        def _parse_next_(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        next_ = _parse_next_(d.pop("next"))

        records = []
        _records = d.pop("records")
        for records_item_data in _records:
            records_item = RecordModel.from_dict(records_item_data)

            records.append(records_item)

        record_page = cls(
            caught_up=caught_up,
            next_=next_,
            records=records,
        )

        record_page.additional_properties = d
        return record_page

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
