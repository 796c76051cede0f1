from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="RetentionModel")


@_attrs_define
class RetentionModel:
    """A log's retention policy (docs/api.md "Retention"): each limit optional (null:
    none); applied in whole closed ledgers, never the log's last ledger.

        Attributes:
            max_age_s (int | None | Unset): remove a closed ledger once it closed this many seconds ago
            max_backlog_bytes (int | None | Unset): with retain_for_cursors: the most bytes cursors hold back past the
                limits; past it the oldest go anyway and the cursors are told (skipped_records)
            max_bytes (int | None | Unset): remove the oldest ledgers while the log holds more
            max_records (int | None | Unset): remove the oldest ledgers while the log holds more
            retain_for_cursors (bool | Unset): keep ledgers a durable cursor has not acknowledged to their end Default:
                False.
    """

    max_age_s: int | None | Unset = UNSET
    max_backlog_bytes: int | None | Unset = UNSET
    max_bytes: int | None | Unset = UNSET
    max_records: int | None | Unset = UNSET
    retain_for_cursors: bool | Unset = False

    def to_dict(self) -> dict[str, Any]:
        max_age_s: int | None | Unset
        if isinstance(self.max_age_s, Unset):
            max_age_s = UNSET
        else:
            max_age_s = self.max_age_s

        max_backlog_bytes: int | None | Unset
        if isinstance(self.max_backlog_bytes, Unset):
            max_backlog_bytes = UNSET
        else:
            max_backlog_bytes = self.max_backlog_bytes

        max_bytes: int | None | Unset
        if isinstance(self.max_bytes, Unset):
            max_bytes = UNSET
        else:
            max_bytes = self.max_bytes

        max_records: int | None | Unset
        if isinstance(self.max_records, Unset):
            max_records = UNSET
        else:
            max_records = self.max_records

        retain_for_cursors = self.retain_for_cursors

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if max_age_s is not UNSET:
            field_dict["max_age_s"] = max_age_s
        if max_backlog_bytes is not UNSET:
            field_dict["max_backlog_bytes"] = max_backlog_bytes
        if max_bytes is not UNSET:
            field_dict["max_bytes"] = max_bytes
        if max_records is not UNSET:
            field_dict["max_records"] = max_records
        if retain_for_cursors is not UNSET:
            field_dict["retain_for_cursors"] = retain_for_cursors

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_max_age_s(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_age_s = _parse_max_age_s(d.pop("max_age_s", UNSET))

        def _parse_max_backlog_bytes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_backlog_bytes = _parse_max_backlog_bytes(d.pop("max_backlog_bytes", UNSET))

        def _parse_max_bytes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_bytes = _parse_max_bytes(d.pop("max_bytes", UNSET))

        def _parse_max_records(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_records = _parse_max_records(d.pop("max_records", UNSET))

        retain_for_cursors = d.pop("retain_for_cursors", UNSET)

        retention_model = cls(
            max_age_s=max_age_s,
            max_backlog_bytes=max_backlog_bytes,
            max_bytes=max_bytes,
            max_records=max_records,
            retain_for_cursors=retain_for_cursors,
        )

        return retention_model
