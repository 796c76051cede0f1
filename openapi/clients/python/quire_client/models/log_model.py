from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.retention_model import RetentionModel
    from ..models.usage_model import UsageModel
    from ..models.writer_model import WriterModel


T = TypeVar("T", bound="LogModel")


@_attrs_define
class LogModel:
    """
    Attributes:
        ledgers (list[int]): the log's ledgers, in log order
        name (str):
        retention (None | RetentionModel): its retention policy; null: none
        writer (None | WriterModel):
        usage (None | Unset | UsageModel): only with ?usage=true
    """

    ledgers: list[int]
    name: str
    retention: None | RetentionModel
    writer: None | WriterModel
    usage: None | Unset | UsageModel = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.retention_model import RetentionModel  # noqa: PLC0415
        from ..models.usage_model import UsageModel  # noqa: PLC0415
        from ..models.writer_model import WriterModel  # noqa: PLC0415

        ledgers = self.ledgers

        name = self.name

        retention: dict[str, Any] | None
        if isinstance(self.retention, RetentionModel):
            retention = self.retention.to_dict()
        else:
            retention = self.retention

        writer: dict[str, Any] | None
        if isinstance(self.writer, WriterModel):
            writer = self.writer.to_dict()
        else:
            writer = self.writer

        usage: dict[str, Any] | None | Unset
        if isinstance(self.usage, Unset):
            usage = UNSET
        elif isinstance(self.usage, UsageModel):
            usage = self.usage.to_dict()
        else:
            usage = self.usage

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "ledgers": ledgers,
                "name": name,
                "retention": retention,
                "writer": writer,
            }
        )
        if usage is not UNSET:
            field_dict["usage"] = usage

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.retention_model import RetentionModel  # noqa: PLC0415
        from ..models.usage_model import UsageModel  # noqa: PLC0415
        from ..models.writer_model import WriterModel  # noqa: PLC0415

        d = dict(src_dict)
        ledgers = cast(list[int], d.pop("ledgers"))

        name = d.pop("name")

        def _parse_retention(data: object) -> None | RetentionModel:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                retention_type_0 = RetentionModel.from_dict(data)

                return retention_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RetentionModel, data)

        retention = _parse_retention(d.pop("retention"))

        def _parse_writer(data: object) -> None | WriterModel:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                writer_type_0 = WriterModel.from_dict(data)

                return writer_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | WriterModel, data)

        writer = _parse_writer(d.pop("writer"))

        def _parse_usage(data: object) -> None | Unset | UsageModel:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                usage_type_0 = UsageModel.from_dict(data)

                return usage_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UsageModel, data)

        usage = _parse_usage(d.pop("usage", UNSET))

        log_model = cls(
            ledgers=ledgers,
            name=name,
            retention=retention,
            writer=writer,
            usage=usage,
        )

        log_model.additional_properties = d
        return log_model

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
