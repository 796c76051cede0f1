from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.bookie_counts import BookieCounts
    from ..models.cluster_racks import ClusterRacks


T = TypeVar("T", bound="Cluster")


@_attrs_define
class Cluster:
    """
    Attributes:
        auditor_elected (bool):
        auditor_id (None | str): the elected auditor's host:port
        bookies (BookieCounts):
        placement_violations (int | None): ledgers whose write quorums span fewer racks than the rack policy wants, as
            the auditor's last complete check found them; null before its first
        racks (ClusterRacks): registered bookies per rack (/default-rack: those that registered none)
        replication_enabled (bool):
        under_replicated_ledgers (int): the number of marks now (placement moves included)
    """

    auditor_elected: bool
    auditor_id: None | str
    bookies: BookieCounts
    placement_violations: int | None
    racks: ClusterRacks
    replication_enabled: bool
    under_replicated_ledgers: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        auditor_elected = self.auditor_elected

        auditor_id: None | str
        auditor_id = self.auditor_id

        bookies = self.bookies.to_dict()

        placement_violations: int | None
        placement_violations = self.placement_violations

        racks = self.racks.to_dict()

        replication_enabled = self.replication_enabled

        under_replicated_ledgers = self.under_replicated_ledgers

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "auditor_elected": auditor_elected,
                "auditor_id": auditor_id,
                "bookies": bookies,
                "placement_violations": placement_violations,
                "racks": racks,
                "replication_enabled": replication_enabled,
                "under_replicated_ledgers": under_replicated_ledgers,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.bookie_counts import BookieCounts  # noqa: PLC0415
        from ..models.cluster_racks import ClusterRacks  # noqa: PLC0415

        d = dict(src_dict)
        auditor_elected = d.pop("auditor_elected")

        def _parse_auditor_id(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        auditor_id = _parse_auditor_id(d.pop("auditor_id"))

        bookies = BookieCounts.from_dict(d.pop("bookies"))

        def _parse_placement_violations(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        placement_violations = _parse_placement_violations(d.pop("placement_violations"))

        racks = ClusterRacks.from_dict(d.pop("racks"))

        replication_enabled = d.pop("replication_enabled")

        under_replicated_ledgers = d.pop("under_replicated_ledgers")

        cluster = cls(
            auditor_elected=auditor_elected,
            auditor_id=auditor_id,
            bookies=bookies,
            placement_violations=placement_violations,
            racks=racks,
            replication_enabled=replication_enabled,
            under_replicated_ledgers=under_replicated_ledgers,
        )

        cluster.additional_properties = d
        return cluster

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
