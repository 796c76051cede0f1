from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.misplaced_ledger import MisplacedLedger
    from ..models.placement_report_racks import PlacementReportRacks


T = TypeVar("T", bound="PlacementReport")


@_attrs_define
class PlacementReport:
    """
    Attributes:
        checked_at (int | None): when the auditor's last complete check ended, ms since the Unix epoch; null before its
            first
        ledgers (list[MisplacedLedger]): the first 100 of them, in id order
        movable (int): of those, the ones a placement move can fix now
        racks (PlacementReportRacks): registered bookies per rack, as that check saw
        truncated (bool): true when there are more than listed
        violations (int): ledgers whose write quorums span fewer racks than min(Qw, racks)
    """

    checked_at: int | None
    ledgers: list[MisplacedLedger]
    movable: int
    racks: PlacementReportRacks
    truncated: bool
    violations: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        checked_at: int | None
        checked_at = self.checked_at

        ledgers = []
        for ledgers_item_data in self.ledgers:
            ledgers_item = ledgers_item_data.to_dict()
            ledgers.append(ledgers_item)

        movable = self.movable

        racks = self.racks.to_dict()

        truncated = self.truncated

        violations = self.violations

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "checked_at": checked_at,
                "ledgers": ledgers,
                "movable": movable,
                "racks": racks,
                "truncated": truncated,
                "violations": violations,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.misplaced_ledger import MisplacedLedger  # noqa: PLC0415
        from ..models.placement_report_racks import PlacementReportRacks  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_checked_at(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        checked_at = _parse_checked_at(d.pop("checked_at"))

        ledgers = []
        _ledgers = d.pop("ledgers")
        for ledgers_item_data in _ledgers:
            ledgers_item = MisplacedLedger.from_dict(ledgers_item_data)

            ledgers.append(ledgers_item)

        movable = d.pop("movable")

        racks = PlacementReportRacks.from_dict(d.pop("racks"))

        truncated = d.pop("truncated")

        violations = d.pop("violations")

        placement_report = cls(
            checked_at=checked_at,
            ledgers=ledgers,
            movable=movable,
            racks=racks,
            truncated=truncated,
            violations=violations,
        )

        placement_report.additional_properties = d
        return placement_report

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
