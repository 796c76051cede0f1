from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.gateway_entry import GatewayEntry


T = TypeVar("T", bound="GatewayList")


@_attrs_define
class GatewayList:
    """
    Attributes:
        gateways (list[GatewayEntry]):
    """

    gateways: list[GatewayEntry]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        gateways = []
        for gateways_item_data in self.gateways:
            gateways_item = gateways_item_data.to_dict()
            gateways.append(gateways_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "gateways": gateways,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.gateway_entry import GatewayEntry  # noqa: PLC0415

        d = dict(src_dict)
        gateways = []
        _gateways = d.pop("gateways")
        for gateways_item_data in _gateways:
            gateways_item = GatewayEntry.from_dict(gateways_item_data)

            gateways.append(gateways_item)

        gateway_list = cls(
            gateways=gateways,
        )

        gateway_list.additional_properties = d
        return gateway_list

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
