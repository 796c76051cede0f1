from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.retention_model import RetentionModel


T = TypeVar("T", bound="PatchLog")


@_attrs_define
class PatchLog:
    """Body of PATCH /v1/logs/{name} (a JSON merge patch, RFC 7396).

    Attributes:
        retention (None | RetentionModel): fields given a value take it, fields given null are cleared, fields not named
            stay; null clears the whole policy
    """

    retention: None | RetentionModel

    def to_dict(self) -> dict[str, Any]:
        from ..models.retention_model import RetentionModel  # noqa: PLC0415

        retention: dict[str, Any] | None
        if isinstance(self.retention, RetentionModel):
            retention = self.retention.to_dict()
        else:
            retention = self.retention

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "retention": retention,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.retention_model import RetentionModel  # noqa: PLC0415

        d = dict(src_dict)

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

        patch_log = cls(
            retention=retention,
        )

        return patch_log
