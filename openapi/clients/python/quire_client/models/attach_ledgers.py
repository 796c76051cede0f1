from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.commit_model import CommitModel


T = TypeVar("T", bound="AttachLedgers")


@_attrs_define
class AttachLedgers:
    """Body of POST /v1/logs/{name}/ledgers.

    Attributes:
        ledgers (list[int]): in log order
        commit (CommitModel | None | Unset):
    """

    ledgers: list[int]
    commit: CommitModel | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.commit_model import CommitModel  # noqa: PLC0415

        ledgers = self.ledgers

        commit: dict[str, Any] | None | Unset
        if isinstance(self.commit, Unset):
            commit = UNSET
        elif isinstance(self.commit, CommitModel):
            commit = self.commit.to_dict()
        else:
            commit = self.commit

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "ledgers": ledgers,
            }
        )
        if commit is not UNSET:
            field_dict["commit"] = commit

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.commit_model import CommitModel  # noqa: PLC0415

        d = dict(src_dict)
        ledgers = cast(list[int], d.pop("ledgers"))

        def _parse_commit(data: object) -> CommitModel | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                commit_type_0 = CommitModel.from_dict(data)

                return commit_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(CommitModel | None | Unset, data)

        commit = _parse_commit(d.pop("commit", UNSET))

        attach_ledgers = cls(
            ledgers=ledgers,
            commit=commit,
        )

        return attach_ledgers
