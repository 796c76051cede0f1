from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.retention_model import RetentionModel


T = TypeVar("T", bound="CreateLog")


@_attrs_define
class CreateLog:
    """Optional body of PUT /v1/logs/{name}: the ensemble of the log's ledgers.

    Attributes:
        ack_quorum (int | Unset):  Default: 2.
        ensemble_size (int | Unset):  Default: 3.
        retention (None | RetentionModel | Unset): its retention policy
        write_quorum (int | Unset):  Default: 2.
    """

    ack_quorum: int | Unset = 2
    ensemble_size: int | Unset = 3
    retention: None | RetentionModel | Unset = UNSET
    write_quorum: int | Unset = 2

    def to_dict(self) -> dict[str, Any]:
        from ..models.retention_model import RetentionModel  # noqa: PLC0415

        ack_quorum = self.ack_quorum

        ensemble_size = self.ensemble_size

        retention: dict[str, Any] | None | Unset
        if isinstance(self.retention, Unset):
            retention = UNSET
        elif isinstance(self.retention, RetentionModel):
            retention = self.retention.to_dict()
        else:
            retention = self.retention

        write_quorum = self.write_quorum

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if ack_quorum is not UNSET:
            field_dict["ack_quorum"] = ack_quorum
        if ensemble_size is not UNSET:
            field_dict["ensemble_size"] = ensemble_size
        if retention is not UNSET:
            field_dict["retention"] = retention
        if write_quorum is not UNSET:
            field_dict["write_quorum"] = write_quorum

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.retention_model import RetentionModel  # noqa: PLC0415

        d = dict(src_dict)
        ack_quorum = d.pop("ack_quorum", UNSET)

        ensemble_size = d.pop("ensemble_size", UNSET)

        def _parse_retention(data: object) -> None | RetentionModel | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                retention_type_0 = RetentionModel.from_dict(data)

                return retention_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RetentionModel | Unset, data)

        retention = _parse_retention(d.pop("retention", UNSET))

        write_quorum = d.pop("write_quorum", UNSET)

        create_log = cls(
            ack_quorum=ack_quorum,
            ensemble_size=ensemble_size,
            retention=retention,
            write_quorum=write_quorum,
        )

        return create_log
