"""The certificates of ``quire up --tls`` (docs/security.md, "TLS").

A CA of the data dir, ``DATA_DIR/tls/ca.pem`` and its key ``ca.key``, made on the first
start and kept: a client given ``ca.pem`` (``curl --cacert``, ``QUIRE_CA_FILE``) keeps
working across restarts. Each service gets a certificate of its own, issued by that CA
at every start, for the host the cluster listens on (and ``localhost``), with its key
beside it (``<name>.pem``, ``<name>.key``). Keys are mode 0600 and the directory 0700.
The services verify one another with the same CA, so every hop is TLS.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from services.cluster.config import ClusterError
from services.tls.certificates import CertificateAuthority
from services.tls.contexts import TlsFiles

CA_NAME = "Quire local CA (quire up --tls)"
DIR_MODE = 0o700


def _names(host: str) -> tuple[list[str], list[str]]:
    """The DNS names and IP addresses a certificate for ``host`` is valid for."""
    dns, ips = ["localhost"], ["127.0.0.1"]
    try:
        ipaddress.ip_address(host)
    except ValueError:
        dns.append(host)
    else:
        ips.append(host)
    return list(dict.fromkeys(dns)), list(dict.fromkeys(ips))


@dataclass(slots=True)
class LocalTls:
    """The CA of one data dir and the certificates it issues to the services."""

    directory: Path
    authority: CertificateAuthority
    host: str

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @classmethod
    def prepare(cls, directory: Path, host: str) -> LocalTls:
        """The CA kept in ``directory``, made there on the first call."""
        directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        os.chmod(directory, DIR_MODE)
        cert, key = directory / "ca.pem", directory / "ca.key"
        if cert.exists() and key.exists():
            try:
                authority = CertificateAuthority.load(cert, key)
            except (OSError, ValueError) as exc:
                raise ClusterError(
                    f"{cert}: the CA of an earlier quire up --tls cannot be used ({exc}); "
                    f"remove {directory} to make a new one (clients then need the new ca.pem)"
                ) from None
        else:
            authority = CertificateAuthority.create(CA_NAME)
            authority.write(cert, key)
        return cls(directory, authority, host)

    def issue(self, name: str) -> TlsFiles:
        """A fresh certificate and key for service ``name``, and the flags' files."""
        dns, ips = _names(self.host)
        files = TlsFiles(self.directory / f"{name}.pem", self.directory / f"{name}.key", self.ca)
        self.authority.issue(name, dns, ips).write(files.cert, files.key)
        return files


def tls_args(files: TlsFiles) -> list[str]:
    """The ``--tls-*`` flags of a service serving with ``files``."""
    return ["--tls-cert", str(files.cert), "--tls-key", str(files.key), "--tls-ca", str(files.ca)]
