from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.position_model import PositionModel


T = TypeVar("T", bound="RecordModel")


@_attrs_define
class RecordModel:
    """
    Attributes:
        data (str): base64
        position (PositionModel): A record's place in a log (``LID:EID`` in URLs).
        time (int | None): the append's stamp, ms since the Unix epoch (never smaller than the record before it in the
            log); null only for data written before records carried one on every entry
    """

    data: str
    position: PositionModel
    time: int | None
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = self.data

        position = self.position.to_dict()

        time: int | None
        time = self.time

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "data": data,
                "position": position,
                "time": time,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.position_model import PositionModel  # noqa: PLC0415

        d = dict(src_dict)
        data = d.pop("data")

        position = PositionModel.from_dict(d.pop("position"))

        def _parse_time(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        time = _parse_time(d.pop("time"))

        record_model = cls(
            data=data,
            position=position,
            time=time,
        )

        record_model.additional_properties = d
        return record_model

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
