"""ZooKeeper digest credentials: who a service is to ZooKeeper, and the ACL it puts on
every znode it creates (docs/security.md, "ZooKeeper authentication").

The credentials are one line ``USER:PASSWORD``, read from a file (``--zk-auth-file``,
``QUIRE_ZK_AUTH_FILE``) or from the variable ``QUIRE_ZK_AUTH``; never from a command
line, which ``ps`` shows to every user of the host. A client holding them authenticates
with ZooKeeper's ``digest`` scheme, and what it creates carries a single ACL entry: all
rights to that principal (``digest:USER:base64(sha1(USER:PASSWORD))``, which is how
ZooKeeper names whoever authenticated with them), none to anyone else.

The password never leaves this module in a form a log line, an error or a repr shows:
it is a ``SecretStr``, errors name the file or the variable, and ``principal`` names the
user only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kazoo.security import ACL, make_digest_acl
from pydantic import SecretStr

from services.zk.limits import AUTH_FILE_BYTES_MAX

AUTH_ENV = "QUIRE_ZK_AUTH"
AUTH_FILE_FLAG = "--zk-auth-file"
# A user name ZooKeeper's digest scheme takes as is (no colon: it ends at the first one),
# also readable in a log line.
_USER = re.compile(r"^[A-Za-z0-9._@+\-]{1,64}$")
_PASSWORD_CHARS_MAX = 1024


class CredentialsError(ValueError):
    """The credentials cannot be used: both sources given, the file unreadable, or not
    ``USER:PASSWORD``. The message names the source, never its content."""


@dataclass(frozen=True, slots=True)
class ZkCredentials:
    """A ZooKeeper digest principal and its password."""

    user: str
    password: SecretStr

    @classmethod
    def parse(cls, text: str, source: str) -> ZkCredentials:
        """The credentials in ``text`` (one line ``USER:PASSWORD``, surrounding white
        space ignored); ``CredentialsError`` naming ``source`` when it is not that."""
        value = text.strip()
        user, colon, password = value.partition(":")
        if not colon or not user or not password or "\n" in value or "\r" in value:
            raise CredentialsError(f"{source} must hold one line USER:PASSWORD")
        if not _USER.match(user):
            raise CredentialsError(
                f"{source}: the user must be 1 to 64 letters, digits and . _ @ + - characters"
            )
        if len(password) > _PASSWORD_CHARS_MAX:
            raise CredentialsError(
                f"{source}: the password is longer than {_PASSWORD_CHARS_MAX} characters"
            )
        return cls(user, SecretStr(password))

    @property
    def principal(self) -> str:
        """How logs and errors name the principal: the scheme and the user, no password."""
        return f"digest user {self.user!r}"

    def auth_data(self) -> list[tuple[str, str]]:
        """kazoo's ``auth_data``: sent on every connection, reconnections included."""
        return [("digest", f"{self.user}:{self.password.get_secret_value()}")]

    def acl(self) -> list[ACL]:
        """kazoo's ``default_acl``: all rights to this principal, none to anyone else."""
        return [make_digest_acl(self.user, self.password.get_secret_value(), all=True)]


def load_credentials(file: Path | None, value: str | None) -> ZkCredentials | None:
    """The credentials of ``file`` (``--zk-auth-file``) or ``value`` (``QUIRE_ZK_AUTH``),
    None when neither is given. Giving both is refused (which one wins would be a guess),
    as is a file that cannot be read or is larger than any credentials."""
    if file is not None and value:
        raise CredentialsError(f"give {AUTH_FILE_FLAG} or {AUTH_ENV}, not both")
    if value:
        return ZkCredentials.parse(value, AUTH_ENV)
    if file is None:
        return None
    source = f"{AUTH_FILE_FLAG} {file}"
    try:
        with file.open("rb") as stream:
            raw = stream.read(AUTH_FILE_BYTES_MAX + 1)
    except FileNotFoundError:
        raise CredentialsError(f"{source}: no such file") from None
    except OSError as exc:
        raise CredentialsError(f"{source}: {exc.strerror or 'cannot be read'}") from None
    if len(raw) > AUTH_FILE_BYTES_MAX:
        raise CredentialsError(f"{source}: larger than {AUTH_FILE_BYTES_MAX} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CredentialsError(f"{source}: not UTF-8 text") from None
    return ZkCredentials.parse(text, source)
