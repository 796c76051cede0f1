from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.create_ledger_metadata import CreateLedgerMetadata


T = TypeVar("T", bound="CreateLedger")


@_attrs_define
class CreateLedger:
    """
    Attributes:
        ack_quorum (int | Unset):  Default: 2.
        digest (str | Unset):  Default: 'crc32c'.
        ensemble_size (int | Unset):  Default: 3.
        metadata (CreateLedgerMetadata | Unset): string keys of at most 256 bytes to string values of at most 4096
            bytes, 16384 bytes in all (UTF-8)
        password (None | str | Unset): 1-256 printable ASCII characters, not starting or ending with a space; required
            with digest hmac-sha256
        write_quorum (int | Unset):  Default: 2.
    """

    ack_quorum: int | Unset = 2
    digest: str | Unset = "crc32c"
    ensemble_size: int | Unset = 3
    metadata: CreateLedgerMetadata | Unset = UNSET
    password: None | str | Unset = UNSET
    write_quorum: int | Unset = 2

    def to_dict(self) -> dict[str, Any]:
        ack_quorum = self.ack_quorum

        digest = self.digest

        ensemble_size = self.ensemble_size

        metadata: dict[str, Any] | Unset = UNSET
        if not isinstance(self.metadata, Unset):
            metadata = self.metadata.to_dict()

        password: None | str | Unset
        if isinstance(self.password, Unset):
            password = UNSET
        else:
            password = self.password

        write_quorum = self.write_quorum

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if ack_quorum is not UNSET:
            field_dict["ack_quorum"] = ack_quorum
        if digest is not UNSET:
            field_dict["digest"] = digest
        if ensemble_size is not UNSET:
            field_dict["ensemble_size"] = ensemble_size
        if metadata is not UNSET:
            field_dict["metadata"] = metadata
        if password is not UNSET:
            field_dict["password"] = password
        if write_quorum is not UNSET:
            field_dict["write_quorum"] = write_quorum

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.create_ledger_metadata import CreateLedgerMetadata  # noqa: PLC0415

        d = dict(src_dict)
        ack_quorum = d.pop("ack_quorum", UNSET)

        digest = d.pop("digest", UNSET)

        ensemble_size = d.pop("ensemble_size", UNSET)

        _metadata = d.pop("metadata", UNSET)
        metadata: CreateLedgerMetadata | Unset
        if isinstance(_metadata, Unset):
            metadata = UNSET
        else:
            metadata = CreateLedgerMetadata.from_dict(_metadata)

        def _parse_password(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        password = _parse_password(d.pop("password", UNSET))

        write_quorum = d.pop("write_quorum", UNSET)

        create_ledger = cls(
            ack_quorum=ack_quorum,
            digest=digest,
            ensemble_size=ensemble_size,
            metadata=metadata,
            password=password,
            write_quorum=write_quorum,
        )

        return create_ledger
