from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateLog")


@_attrs_define
class CreateLog:
    """Optional body of PUT /v1/logs/{name}: the ensemble of the log's ledgers.

    Attributes:
        ack_quorum (int | Unset):  Default: 2.
        ensemble_size (int | Unset):  Default: 3.
        write_quorum (int | Unset):  Default: 2.
    """

    ack_quorum: int | Unset = 2
    ensemble_size: int | Unset = 3
    write_quorum: int | Unset = 2

    def to_dict(self) -> dict[str, Any]:
        ack_quorum = self.ack_quorum

        ensemble_size = self.ensemble_size

        write_quorum = self.write_quorum

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if ack_quorum is not UNSET:
            field_dict["ack_quorum"] = ack_quorum
        if ensemble_size is not UNSET:
            field_dict["ensemble_size"] = ensemble_size
        if write_quorum is not UNSET:
            field_dict["write_quorum"] = write_quorum

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        ack_quorum = d.pop("ack_quorum", UNSET)

        ensemble_size = d.pop("ensemble_size", UNSET)

        write_quorum = d.pop("write_quorum", UNSET)

        create_log = cls(
            ack_quorum=ack_quorum,
            ensemble_size=ensemble_size,
            write_quorum=write_quorum,
        )

        return create_log
