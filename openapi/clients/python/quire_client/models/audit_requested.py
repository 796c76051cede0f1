from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="AuditRequested")


@_attrs_define
class AuditRequested:
    """
    Attributes:
        auditor_id (None | str): the elected auditor that will run the check; null when none runs (the request waits for
            one)
        requested (bool):
    """

    auditor_id: None | str
    requested: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        auditor_id: None | str
        auditor_id = self.auditor_id

        requested = self.requested

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "auditor_id": auditor_id,
                "requested": requested,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_auditor_id(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        auditor_id = _parse_auditor_id(d.pop("auditor_id"))

        requested = d.pop("requested")

        audit_requested = cls(
            auditor_id=auditor_id,
            requested=requested,
        )

        audit_requested.additional_properties = d
        return audit_requested

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
