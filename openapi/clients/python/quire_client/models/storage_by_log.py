from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.storage_bucket import StorageBucket
    from ..models.storage_log_total import StorageLogTotal


T = TypeVar("T", bound="StorageByLog")


@_attrs_define
class StorageByLog:
    """A bookie's bytes counted by log (docs/operations.md, "Space given back").

    Attributes:
        ledgers_looked_at (int): ledgers counted (all of them unless truncated)
        logs (list[StorageLogTotal]): the largest first (ties by name), at most 100; logs_count covers all
        logs_count (int): logs with a ledger on the bookie
        metadata_missing (StorageBucket):
        metadata_unreadable (StorageBucket):
        not_in_a_log (StorageBucket):
        truncated (bool): true when the count stopped at its bound (ledgers or time): the totals cover the ledgers
            looked at, the lowest ids
    """

    ledgers_looked_at: int
    logs: list[StorageLogTotal]
    logs_count: int
    metadata_missing: StorageBucket
    metadata_unreadable: StorageBucket
    not_in_a_log: StorageBucket
    truncated: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        ledgers_looked_at = self.ledgers_looked_at

        logs = []
        for logs_item_data in self.logs:
            logs_item = logs_item_data.to_dict()
            logs.append(logs_item)

        logs_count = self.logs_count

        metadata_missing = self.metadata_missing.to_dict()

        metadata_unreadable = self.metadata_unreadable.to_dict()

        not_in_a_log = self.not_in_a_log.to_dict()

        truncated = self.truncated

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "ledgers_looked_at": ledgers_looked_at,
                "logs": logs,
                "logs_count": logs_count,
                "metadata_missing": metadata_missing,
                "metadata_unreadable": metadata_unreadable,
                "not_in_a_log": not_in_a_log,
                "truncated": truncated,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.storage_bucket import StorageBucket  # noqa: PLC0415
        from ..models.storage_log_total import StorageLogTotal  # noqa: PLC0415

        d = dict(src_dict)
        ledgers_looked_at = d.pop("ledgers_looked_at")

        logs = []
        _logs = d.pop("logs")
        for logs_item_data in _logs:
            logs_item = StorageLogTotal.from_dict(logs_item_data)

            logs.append(logs_item)

        logs_count = d.pop("logs_count")

        metadata_missing = StorageBucket.from_dict(d.pop("metadata_missing"))

        metadata_unreadable = StorageBucket.from_dict(d.pop("metadata_unreadable"))

        not_in_a_log = StorageBucket.from_dict(d.pop("not_in_a_log"))

        truncated = d.pop("truncated")

        storage_by_log = cls(
            ledgers_looked_at=ledgers_looked_at,
            logs=logs,
            logs_count=logs_count,
            metadata_missing=metadata_missing,
            metadata_unreadable=metadata_unreadable,
            not_in_a_log=not_in_a_log,
            truncated=truncated,
        )

        storage_by_log.additional_properties = d
        return storage_by_log

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
