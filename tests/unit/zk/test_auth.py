"""ZooKeeper digest credentials (services/zk/auth.py, docs/security.md "ZooKeeper
authentication"): read from a file or QUIRE_ZK_AUTH, refused in one line naming the
source and never the password, and turned into kazoo's auth_data and default ACL."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import pytest
from kazoo.security import Permissions

from services.zk.auth import CredentialsError, ZkCredentials, load_credentials
from services.zk.limits import AUTH_FILE_BYTES_MAX

PASSWORD = "pa:ss w0rd"  # a colon and a space are part of a password


def test_the_file_holds_one_line_user_colon_password(tmp_path: Path) -> None:
    """The first colon ends the user; the password keeps the rest, trailing newline off."""
    path = tmp_path / "zk-auth"
    path.write_text(f"quire:{PASSWORD}\n")
    credentials = load_credentials(path, None)
    assert credentials is not None
    assert credentials.user == "quire"
    assert credentials.password.get_secret_value() == PASSWORD


def test_the_variable_holds_the_same() -> None:
    credentials = load_credentials(None, f"quire:{PASSWORD}")
    assert credentials is not None
    assert credentials.auth_data() == [("digest", f"quire:{PASSWORD}")]


def test_neither_means_no_credentials() -> None:
    """Without a file or the variable the services run as today (open ACLs)."""
    assert load_credentials(None, None) is None
    assert load_credentials(None, "") is None


def test_both_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "zk-auth"
    path.write_text("quire:one")
    with pytest.raises(CredentialsError, match="not both"):
        load_credentials(path, "quire:two")


@pytest.mark.parametrize(
    "text",
    ["quire", "quire:", ":secret", "quire:secret\nother:line", "qu ire:secret"],
    ids=["no-colon", "no-password", "no-user", "two-lines", "space-in-user"],
)
def test_a_malformed_value_is_refused_naming_the_source_not_the_value(text: str) -> None:
    with pytest.raises(CredentialsError) as exc:
        load_credentials(None, text)
    assert "QUIRE_ZK_AUTH" in str(exc.value)
    assert "secret" not in str(exc.value)


def test_a_file_that_cannot_be_used_is_refused_in_one_line(tmp_path: Path) -> None:
    """Missing, unreadable, too large or not text: one message naming the flag and file."""
    missing = tmp_path / "missing"
    with pytest.raises(CredentialsError, match=f"--zk-auth-file {missing}: no such file"):
        load_credentials(missing, None)
    large = tmp_path / "large"
    large.write_text("quire:" + "x" * AUTH_FILE_BYTES_MAX)
    with pytest.raises(CredentialsError, match="larger than"):
        load_credentials(large, None)
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(CredentialsError, match="must hold one line USER:PASSWORD"):
        load_credentials(empty, None)
    binary = tmp_path / "binary"
    binary.write_bytes(b"quire:\xff\xfe")
    with pytest.raises(CredentialsError, match="not UTF-8"):
        load_credentials(binary, None)
    if os.geteuid() != 0:  # root reads whatever the mode says
        unreadable = tmp_path / "unreadable"
        unreadable.write_text("quire:secret")
        unreadable.chmod(0)
        with pytest.raises(CredentialsError, match="ermission denied"):
            load_credentials(unreadable, None)


def test_the_password_shows_nowhere() -> None:
    """repr, str and the principal name the user only."""
    credentials = ZkCredentials.parse(f"quire:{PASSWORD}", "test")
    for text in (repr(credentials), str(credentials), credentials.principal, f"{credentials}"):
        assert PASSWORD not in text
        assert "w0rd" not in text
    assert credentials.principal == "digest user 'quire'"


def test_the_acl_gives_the_principal_all_rights_and_nobody_else_any() -> None:
    """One entry: the digest id ZooKeeper derives from the same credentials
    (USER:base64(sha1(USER:PASSWORD))) with every permission."""
    acl = ZkCredentials.parse(f"quire:{PASSWORD}", "test").acl()
    digest = base64.b64encode(hashlib.sha1(f"quire:{PASSWORD}".encode()).digest()).decode()
    assert len(acl) == 1
    assert acl[0].perms == Permissions.ALL
    assert (acl[0].id.scheme, acl[0].id.id) == ("digest", f"quire:{digest}")
