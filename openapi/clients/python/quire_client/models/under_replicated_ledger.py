from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.under_replicated_ledger_progress_type_0 import UnderReplicatedLedgerProgressType0


T = TypeVar("T", bound="UnderReplicatedLedger")


@_attrs_define
class UnderReplicatedLedger:
    """
    Attributes:
        ledger_id (int):
        marked_at (int): when it was first marked, ms since the Unix epoch
        misplaced (bool): a placement move is asked for too: a fragment's write quorums span too few racks, and a bookie
            on another rack can fix it
        missing_bookies (list[str]): may be empty when only a move is asked
        progress (None | UnderReplicatedLedgerProgressType0): the repair progress the worker holding its lock reports,
            or null when no worker holds it
        worker (None | str): the id of the worker repairing it, or null
    """

    ledger_id: int
    marked_at: int
    misplaced: bool
    missing_bookies: list[str]
    progress: None | UnderReplicatedLedgerProgressType0
    worker: None | str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.under_replicated_ledger_progress_type_0 import UnderReplicatedLedgerProgressType0  # noqa: PLC0415

        ledger_id = self.ledger_id

        marked_at = self.marked_at

        misplaced = self.misplaced

        missing_bookies = self.missing_bookies

        progress: dict[str, Any] | None
        if isinstance(self.progress, UnderReplicatedLedgerProgressType0):
            progress = self.progress.to_dict()
        else:
            progress = self.progress

        worker: None | str
        worker = self.worker

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "ledger_id": ledger_id,
                "marked_at": marked_at,
                "misplaced": misplaced,
                "missing_bookies": missing_bookies,
                "progress": progress,
                "worker": worker,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.under_replicated_ledger_progress_type_0 import UnderReplicatedLedgerProgressType0  # noqa: PLC0415

        d = dict(src_dict)
        ledger_id = d.pop("ledger_id")

        marked_at = d.pop("marked_at")

        misplaced = d.pop("misplaced")

        missing_bookies = cast(list[str], d.pop("missing_bookies"))

        def _parse_progress(data: object) -> None | UnderReplicatedLedgerProgressType0:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                progress_type_0 = UnderReplicatedLedgerProgressType0.from_dict(data)

                return progress_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | UnderReplicatedLedgerProgressType0, data)

        progress = _parse_progress(d.pop("progress"))

        def _parse_worker(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        worker = _parse_worker(d.pop("worker"))

        under_replicated_ledger = cls(
            ledger_id=ledger_id,
            marked_at=marked_at,
            misplaced=misplaced,
            missing_bookies=missing_bookies,
            progress=progress,
            worker=worker,
        )

        under_replicated_ledger.additional_properties = d
        return under_replicated_ledger

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
