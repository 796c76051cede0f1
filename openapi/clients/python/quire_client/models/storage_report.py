from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.storage_by_log import StorageByLog
    from ..models.storage_gc_settings import StorageGcSettings
    from ..models.storage_last_pass import StorageLastPass
    from ..models.storage_ledger import StorageLedger
    from ..models.storage_live import StorageLive
    from ..models.storage_purging import StoragePurging


T = TypeVar("T", bound="StorageReport")


@_attrs_define
class StorageReport:
    """A bookie's storage report, as the bookie answers it (docs/operations.md, "Space
    given back").

        Attributes:
            bookie (str): the bookie's id
            bytes_count_ms (int): how long that sum over the ledgers took
            bytes_counted_at (str): when the bookie read its bytes per ledger (ISO 8601, UTC): the counts it keeps with its
                entries, summed for this report
            file_bytes (int): size of its database
            free_pages_bytes (int): bytes of free pages in it; file_bytes - free_pages_bytes is what the data uses
            gc (StorageGcSettings):
            last_pass (None | StorageLastPass): the last pass (not a dry run)
            live (StorageLive):
            orphaned (list[StorageLedger]): metadata found missing once, waiting for the second look after the grace (the
                first 100; the count covers all)
            orphaned_bytes (int):
            orphaned_count (int):
            pending_delete (list[StorageLedger]): metadata found missing and past the grace: the next pass deletes them (the
                first 100; the count covers all)
            pending_delete_bytes (int):
            pending_delete_count (int):
            by_log (None | StorageByLog | Unset): only with by_log=true: the bookie's bytes counted by log
            purging (None | StoragePurging | Unset): deleted ledgers not yet purged (absent from bookies of older versions)
    """

    bookie: str
    bytes_count_ms: int
    bytes_counted_at: str
    file_bytes: int
    free_pages_bytes: int
    gc: StorageGcSettings
    last_pass: None | StorageLastPass
    live: StorageLive
    orphaned: list[StorageLedger]
    orphaned_bytes: int
    orphaned_count: int
    pending_delete: list[StorageLedger]
    pending_delete_bytes: int
    pending_delete_count: int
    by_log: None | StorageByLog | Unset = UNSET
    purging: None | StoragePurging | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.storage_by_log import StorageByLog  # noqa: PLC0415
        from ..models.storage_last_pass import StorageLastPass  # noqa: PLC0415
        from ..models.storage_purging import StoragePurging  # noqa: PLC0415

        bookie = self.bookie

        bytes_count_ms = self.bytes_count_ms

        bytes_counted_at = self.bytes_counted_at

        file_bytes = self.file_bytes

        free_pages_bytes = self.free_pages_bytes

        gc = self.gc.to_dict()

        last_pass: dict[str, Any] | None
        if isinstance(self.last_pass, StorageLastPass):
            last_pass = self.last_pass.to_dict()
        else:
            last_pass = self.last_pass

        live = self.live.to_dict()

        orphaned = []
        for orphaned_item_data in self.orphaned:
            orphaned_item = orphaned_item_data.to_dict()
            orphaned.append(orphaned_item)

        orphaned_bytes = self.orphaned_bytes

        orphaned_count = self.orphaned_count

        pending_delete = []
        for pending_delete_item_data in self.pending_delete:
            pending_delete_item = pending_delete_item_data.to_dict()
            pending_delete.append(pending_delete_item)

        pending_delete_bytes = self.pending_delete_bytes

        pending_delete_count = self.pending_delete_count

        by_log: dict[str, Any] | None | Unset
        if isinstance(self.by_log, Unset):
            by_log = UNSET
        elif isinstance(self.by_log, StorageByLog):
            by_log = self.by_log.to_dict()
        else:
            by_log = self.by_log

        purging: dict[str, Any] | None | Unset
        if isinstance(self.purging, Unset):
            purging = UNSET
        elif isinstance(self.purging, StoragePurging):
            purging = self.purging.to_dict()
        else:
            purging = self.purging

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "bookie": bookie,
                "bytes_count_ms": bytes_count_ms,
                "bytes_counted_at": bytes_counted_at,
                "file_bytes": file_bytes,
                "free_pages_bytes": free_pages_bytes,
                "gc": gc,
                "last_pass": last_pass,
                "live": live,
                "orphaned": orphaned,
                "orphaned_bytes": orphaned_bytes,
                "orphaned_count": orphaned_count,
                "pending_delete": pending_delete,
                "pending_delete_bytes": pending_delete_bytes,
                "pending_delete_count": pending_delete_count,
            }
        )
        if by_log is not UNSET:
            field_dict["by_log"] = by_log
        if purging is not UNSET:
            field_dict["purging"] = purging

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.storage_by_log import StorageByLog  # noqa: PLC0415
        from ..models.storage_gc_settings import StorageGcSettings  # noqa: PLC0415
        from ..models.storage_last_pass import StorageLastPass  # noqa: PLC0415
        from ..models.storage_ledger import StorageLedger  # noqa: PLC0415
        from ..models.storage_live import StorageLive  # noqa: PLC0415
        from ..models.storage_purging import StoragePurging  # noqa: PLC0415

        d = dict(src_dict)
        bookie = d.pop("bookie")

        bytes_count_ms = d.pop("bytes_count_ms")

        bytes_counted_at = d.pop("bytes_counted_at")

        file_bytes = d.pop("file_bytes")

        free_pages_bytes = d.pop("free_pages_bytes")

        gc = StorageGcSettings.from_dict(d.pop("gc"))

        def _parse_last_pass(data: object) -> None | StorageLastPass:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                last_pass_type_0 = StorageLastPass.from_dict(data)

                return last_pass_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | StorageLastPass, data)

        last_pass = _parse_last_pass(d.pop("last_pass"))

        live = StorageLive.from_dict(d.pop("live"))

        orphaned = []
        _orphaned = d.pop("orphaned")
        for orphaned_item_data in _orphaned:
            orphaned_item = StorageLedger.from_dict(orphaned_item_data)

            orphaned.append(orphaned_item)

        orphaned_bytes = d.pop("orphaned_bytes")

        orphaned_count = d.pop("orphaned_count")

        pending_delete = []
        _pending_delete = d.pop("pending_delete")
        for pending_delete_item_data in _pending_delete:
            pending_delete_item = StorageLedger.from_dict(pending_delete_item_data)

            pending_delete.append(pending_delete_item)

        pending_delete_bytes = d.pop("pending_delete_bytes")

        pending_delete_count = d.pop("pending_delete_count")

        def _parse_by_log(data: object) -> None | StorageByLog | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                by_log_type_0 = StorageByLog.from_dict(data)

                return by_log_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | StorageByLog | Unset, data)

        by_log = _parse_by_log(d.pop("by_log", UNSET))

        def _parse_purging(data: object) -> None | StoragePurging | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                purging_type_0 = StoragePurging.from_dict(data)

                return purging_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | StoragePurging | Unset, data)

        purging = _parse_purging(d.pop("purging", UNSET))

        storage_report = cls(
            bookie=bookie,
            bytes_count_ms=bytes_count_ms,
            bytes_counted_at=bytes_counted_at,
            file_bytes=file_bytes,
            free_pages_bytes=free_pages_bytes,
            gc=gc,
            last_pass=last_pass,
            live=live,
            orphaned=orphaned,
            orphaned_bytes=orphaned_bytes,
            orphaned_count=orphaned_count,
            pending_delete=pending_delete,
            pending_delete_bytes=pending_delete_bytes,
            pending_delete_count=pending_delete_count,
            by_log=by_log,
            purging=purging,
        )

        storage_report.additional_properties = d
        return storage_report

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
