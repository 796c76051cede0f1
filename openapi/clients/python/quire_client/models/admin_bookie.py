from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.admin_bookie_state import AdminBookieState

T = TypeVar("T", bound="AdminBookie")


@_attrs_define
class AdminBookie:
    """
    Attributes:
        address (str):
        entries_added (int | None): entries the bookie stored since it started (a rate over two readings is its adds per
            second), or null
        free_bytes (int | None): free disk bytes of its data dir, or null
        free_ratio (float | None): free_bytes / total_bytes, or null
        id (str): the bookie's id, its advertised host:port
        instance_id (None | str): the instance id of its cookie
        ledgers (int | None): ledgers stored; null when the bookie is down or did not answer in time
        rack (None | str): the rack it registered (--rack); null when it registered none (the default rack) or is not
            registered
        state (AdminBookieState): decommissioning/decommissioned (a decommission was requested) win over
            writable/readonly (registered) and down (a cookie but not registered)
        total_bytes (int | None): disk size of its data dir, or null
    """

    address: str
    entries_added: int | None
    free_bytes: int | None
    free_ratio: float | None
    id: str
    instance_id: None | str
    ledgers: int | None
    rack: None | str
    state: AdminBookieState
    total_bytes: int | None
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        address = self.address

        entries_added: int | None
        entries_added = self.entries_added

        free_bytes: int | None
        free_bytes = self.free_bytes

        free_ratio: float | None
        free_ratio = self.free_ratio

        id = self.id

        instance_id: None | str
        instance_id = self.instance_id

        ledgers: int | None
        ledgers = self.ledgers

        rack: None | str
        rack = self.rack

        state = self.state.value

        total_bytes: int | None
        total_bytes = self.total_bytes

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "address": address,
                "entries_added": entries_added,
                "free_bytes": free_bytes,
                "free_ratio": free_ratio,
                "id": id,
                "instance_id": instance_id,
                "ledgers": ledgers,
                "rack": rack,
                "state": state,
                "total_bytes": total_bytes,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        address = d.pop("address")

        def _parse_entries_added(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        entries_added = _parse_entries_added(d.pop("entries_added"))

        def _parse_free_bytes(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        free_bytes = _parse_free_bytes(d.pop("free_bytes"))

        def _parse_free_ratio(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        free_ratio = _parse_free_ratio(d.pop("free_ratio"))

        id = d.pop("id")

        def _parse_instance_id(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        instance_id = _parse_instance_id(d.pop("instance_id"))

        def _parse_ledgers(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        ledgers = _parse_ledgers(d.pop("ledgers"))

        def _parse_rack(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        rack = _parse_rack(d.pop("rack"))

        state = AdminBookieState(d.pop("state"))

        def _parse_total_bytes(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        total_bytes = _parse_total_bytes(d.pop("total_bytes"))

        admin_bookie = cls(
            address=address,
            entries_added=entries_added,
            free_bytes=free_bytes,
            free_ratio=free_ratio,
            id=id,
            instance_id=instance_id,
            ledgers=ledgers,
            rack=rack,
            state=state,
            total_bytes=total_bytes,
        )

        admin_bookie.additional_properties = d
        return admin_bookie

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
