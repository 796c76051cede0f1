from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="UsageModel")


@_attrs_define
class UsageModel:
    """What a log holds (``GET /v1/logs/{name}?usage=true``).

    Attributes:
        bytes_ (int): ledger lengths (the log layer's envelope counted)
        ledgers (int):
        oldest_ms (int | None): ms since the Unix epoch when its oldest ledger was made (its records are no older); null
            for a log with no ledger
        records (int):
    """

    bytes_: int
    ledgers: int
    oldest_ms: int | None
    records: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        bytes_ = self.bytes_

        ledgers = self.ledgers

        oldest_ms: int | None
        oldest_ms = self.oldest_ms

        records = self.records

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "bytes": bytes_,
                "ledgers": ledgers,
                "oldest_ms": oldest_ms,
                "records": records,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        bytes_ = d.pop("bytes")

        ledgers = d.pop("ledgers")

        def _parse_oldest_ms(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        oldest_ms = _parse_oldest_ms(d.pop("oldest_ms"))

        records = d.pop("records")

        usage_model = cls(
            bytes_=bytes_,
            ledgers=ledgers,
            oldest_ms=oldest_ms,
            records=records,
        )

        usage_model.additional_properties = d
        return usage_model

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
