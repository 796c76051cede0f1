from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.log_model import LogModel


T = TypeVar("T", bound="AttachResult")


@_attrs_define
class AttachResult:
    """
    Attributes:
        committed (bool): false: the commit's sequence was recorded already
        epoch (int):
        log (LogModel):
    """

    committed: bool
    epoch: int
    log: LogModel
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        committed = self.committed

        epoch = self.epoch

        log = self.log.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "committed": committed,
                "epoch": epoch,
                "log": log,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.log_model import LogModel  # noqa: PLC0415

        d = dict(src_dict)
        committed = d.pop("committed")

        epoch = d.pop("epoch")

        log = LogModel.from_dict(d.pop("log"))

        attach_result = cls(
            committed=committed,
            epoch=epoch,
            log=log,
        )

        attach_result.additional_properties = d
        return attach_result

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
