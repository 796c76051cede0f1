from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.drain_failure import DrainFailure


T = TypeVar("T", bound="Drained")


@_attrs_define
class Drained:
    """
    Attributes:
        draining (bool):
        failed (list[DrainFailure]): logs still written here (drain again to retry them)
        gateway (str):
        handed_over (int): logs another gateway writes now
    """

    draining: bool
    failed: list[DrainFailure]
    gateway: str
    handed_over: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        draining = self.draining

        failed = []
        for failed_item_data in self.failed:
            failed_item = failed_item_data.to_dict()
            failed.append(failed_item)

        gateway = self.gateway

        handed_over = self.handed_over

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "draining": draining,
                "failed": failed,
                "gateway": gateway,
                "handed_over": handed_over,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.drain_failure import DrainFailure  # noqa: PLC0415

        d = dict(src_dict)
        draining = d.pop("draining")

        failed = []
        _failed = d.pop("failed")
        for failed_item_data in _failed:
            failed_item = DrainFailure.from_dict(failed_item_data)

            failed.append(failed_item)

        gateway = d.pop("gateway")

        handed_over = d.pop("handed_over")

        drained = cls(
            draining=draining,
            failed=failed,
            gateway=gateway,
            handed_over=handed_over,
        )

        drained.additional_properties = d
        return drained

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
