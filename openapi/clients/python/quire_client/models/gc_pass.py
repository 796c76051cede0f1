from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.gc_freed_ledger import GcFreedLedger


T = TypeVar("T", bound="GcPass")


@_attrs_define
class GcPass:
    """What a garbage-collection pass on a bookie did (a dry run: would do).

    Attributes:
        at (str): when the pass ended (ISO 8601, UTC)
        dry_run (bool):
        error (None | str): why the looks stopped early, or null
        freed (list[GcFreedLedger]): the first 100 ledgers freed
        freed_bytes (int):
        freed_ledgers (int):
        pending_ledgers (int): past the grace, beyond deletes_per_pass
        took_ms (int):
        waiting_ledgers (int): found missing, within the grace
    """

    at: str
    dry_run: bool
    error: None | str
    freed: list[GcFreedLedger]
    freed_bytes: int
    freed_ledgers: int
    pending_ledgers: int
    took_ms: int
    waiting_ledgers: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        at = self.at

        dry_run = self.dry_run

        error: None | str
        error = self.error

        freed = []
        for freed_item_data in self.freed:
            freed_item = freed_item_data.to_dict()
            freed.append(freed_item)

        freed_bytes = self.freed_bytes

        freed_ledgers = self.freed_ledgers

        pending_ledgers = self.pending_ledgers

        took_ms = self.took_ms

        waiting_ledgers = self.waiting_ledgers

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "at": at,
                "dry_run": dry_run,
                "error": error,
                "freed": freed,
                "freed_bytes": freed_bytes,
                "freed_ledgers": freed_ledgers,
                "pending_ledgers": pending_ledgers,
                "took_ms": took_ms,
                "waiting_ledgers": waiting_ledgers,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.gc_freed_ledger import GcFreedLedger  # noqa: PLC0415

        d = dict(src_dict)
        at = d.pop("at")

        dry_run = d.pop("dry_run")

        def _parse_error(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        error = _parse_error(d.pop("error"))

        freed = []
        _freed = d.pop("freed")
        for freed_item_data in _freed:
            freed_item = GcFreedLedger.from_dict(freed_item_data)

            freed.append(freed_item)

        freed_bytes = d.pop("freed_bytes")

        freed_ledgers = d.pop("freed_ledgers")

        pending_ledgers = d.pop("pending_ledgers")

        took_ms = d.pop("took_ms")

        waiting_ledgers = d.pop("waiting_ledgers")

        gc_pass = cls(
            at=at,
            dry_run=dry_run,
            error=error,
            freed=freed,
            freed_bytes=freed_bytes,
            freed_ledgers=freed_ledgers,
            pending_ledgers=pending_ledgers,
            took_ms=took_ms,
            waiting_ledgers=waiting_ledgers,
        )

        gc_pass.additional_properties = d
        return gc_pass

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
