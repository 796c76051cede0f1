from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.fragment import Fragment
    from ..models.ledger_metadata import LedgerMetadata


T = TypeVar("T", bound="Ledger")


@_attrs_define
class Ledger:
    """
    Attributes:
        ack_quorum (int):
        created_at (int): milliseconds since the Unix epoch
        digest (str):
        ensemble_size (int):
        fragments (list[Fragment]):
        last_entry_id (int | None): null unless CLOSED
        ledger_id (int):
        length (int): total payload bytes; exact once CLOSED
        metadata (LedgerMetadata):
        state (str): OPEN, IN_RECOVERY or CLOSED
        write_quorum (int):
        closed_at (int | None | Unset): milliseconds since the Unix epoch when it was closed; null while open (and for a
            ledger closed before this field existed)
    """

    ack_quorum: int
    created_at: int
    digest: str
    ensemble_size: int
    fragments: list[Fragment]
    last_entry_id: int | None
    ledger_id: int
    length: int
    metadata: LedgerMetadata
    state: str
    write_quorum: int
    closed_at: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        ack_quorum = self.ack_quorum

        created_at = self.created_at

        digest = self.digest

        ensemble_size = self.ensemble_size

        fragments = []
        for fragments_item_data in self.fragments:
            fragments_item = fragments_item_data.to_dict()
            fragments.append(fragments_item)

        last_entry_id: int | None
        last_entry_id = self.last_entry_id

        ledger_id = self.ledger_id

        length = self.length

        metadata = self.metadata.to_dict()

        state = self.state

        write_quorum = self.write_quorum

        closed_at: int | None | Unset
        if isinstance(self.closed_at, Unset):
            closed_at = UNSET
        else:
            closed_at = self.closed_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "ack_quorum": ack_quorum,
                "created_at": created_at,
                "digest": digest,
                "ensemble_size": ensemble_size,
                "fragments": fragments,
                "last_entry_id": last_entry_id,
                "ledger_id": ledger_id,
                "length": length,
                "metadata": metadata,
                "state": state,
                "write_quorum": write_quorum,
            }
        )
        if closed_at is not UNSET:
            field_dict["closed_at"] = closed_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.fragment import Fragment  # noqa: PLC0415
        from ..models.ledger_metadata import LedgerMetadata  # noqa: PLC0415

        d = dict(src_dict)
        ack_quorum = d.pop("ack_quorum")

        created_at = d.pop("created_at")

        digest = d.pop("digest")

        ensemble_size = d.pop("ensemble_size")

        fragments = []
        _fragments = d.pop("fragments")
        for fragments_item_data in _fragments:
            fragments_item = Fragment.from_dict(fragments_item_data)

            fragments.append(fragments_item)

        def _parse_last_entry_id(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        last_entry_id = _parse_last_entry_id(d.pop("last_entry_id"))

        ledger_id = d.pop("ledger_id")

        length = d.pop("length")

        metadata = LedgerMetadata.from_dict(d.pop("metadata"))

        state = d.pop("state")

        write_quorum = d.pop("write_quorum")

        def _parse_closed_at(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        closed_at = _parse_closed_at(d.pop("closed_at", UNSET))

        ledger = cls(
            ack_quorum=ack_quorum,
            created_at=created_at,
            digest=digest,
            ensemble_size=ensemble_size,
            fragments=fragments,
            last_entry_id=last_entry_id,
            ledger_id=ledger_id,
            length=length,
            metadata=metadata,
            state=state,
            write_quorum=write_quorum,
            closed_at=closed_at,
        )

        ledger.additional_properties = d
        return ledger

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
