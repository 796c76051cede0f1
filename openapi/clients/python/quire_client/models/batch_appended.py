from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.position_model import PositionModel


T = TypeVar("T", bound="BatchAppended")


@_attrs_define
class BatchAppended:
    """
    Attributes:
        first_position (PositionModel): A record's place in a log (``LID:EID`` in URLs).
        last_position (PositionModel): A record's place in a log (``LID:EID`` in URLs).
    """

    first_position: PositionModel
    last_position: PositionModel
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        first_position = self.first_position.to_dict()

        last_position = self.last_position.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "first_position": first_position,
                "last_position": last_position,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.position_model import PositionModel  # noqa: PLC0415

        d = dict(src_dict)
        first_position = PositionModel.from_dict(d.pop("first_position"))

        last_position = PositionModel.from_dict(d.pop("last_position"))

        batch_appended = cls(
            first_position=first_position,
            last_position=last_position,
        )

        batch_appended.additional_properties = d
        return batch_appended

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
