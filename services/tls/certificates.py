"""A local certificate authority and the leaf certificates it signs, with the
``cryptography`` package: for the tests and for clusters run on one's own hosts.

``CertificateAuthority.create`` makes a self-signed CA (an EC P-256 key, the CA flag,
``keyCertSign``); ``issue`` signs a leaf for a service with the names it is reached by
as subject alternative names (DNS names and IP addresses: a client checks the name it
dialled against them, a bookie client the host of the bookie's id), usable as a server
and as a client certificate (mutual TLS). ``write`` puts a certificate and its key in PEM
files; a key file is made readable by its owner only, from its creation.

What it will not do: revocation lists, intermediate CAs, or keys other than P-256.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# A certificate is valid from a little before it was made (clocks of hosts differ).
_BACKDATE = datetime.timedelta(hours=1)
CA_VALID_DAYS = 3650
LEAF_VALID_DAYS = 825
KEY_FILE_MODE = 0o600


@dataclass(frozen=True, slots=True)
class Issued:
    """A certificate and its private key."""

    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def write(self, cert_path: Path, key_path: Path) -> None:
        """The certificate and key as PEM files; the key file is mode 0600 from its
        creation (an existing one is replaced, never widened)."""
        cert_path.write_bytes(self.certificate_pem())
        temporary = key_path.with_name(f".{key_path.name}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, KEY_FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            f.write(self.key_pem())
        os.replace(temporary, key_path)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    now: datetime.datetime,
    valid_days: int,
) -> x509.CertificateBuilder:
    """A certificate of ``subject`` signed by ``issuer``, valid from a little before
    ``now`` for ``valid_days``, with a random serial number; extensions still to add."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=valid_days))
    )


def _key_usage(ca: bool) -> x509.KeyUsage:
    """A CA signs certificates (and revocation lists); a leaf signs and agrees keys
    (ECDHE handshakes)."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=not ca,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class CertificateAuthority(Issued):
    """A self-signed CA that signs leaf certificates."""

    @classmethod
    def create(
        cls, name: str = "Quire local CA", valid_days: int = CA_VALID_DAYS
    ) -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        certificate = (
            _builder(_name(name), _name(name), key.public_key(), now, valid_days)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(ca=True), critical=True)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .sign(key, hashes.SHA256())
        )
        return cls(certificate, key)

    @classmethod
    def load(cls, cert_path: Path, key_path: Path) -> CertificateAuthority:
        """A CA written before (``write``)."""
        certificate = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{key_path}: not an EC private key")
        return cls(certificate, key)

    def issue(
        self,
        common_name: str,
        dns_names: Sequence[str] = (),
        ips: Sequence[str] = (),
        valid_days: int = LEAF_VALID_DAYS,
    ) -> Issued:
        """A leaf certificate for ``common_name``, valid for ``dns_names`` and ``ips``
        (its subject alternative names), for serving and for mutual TLS."""
        if not dns_names and not ips:
            raise ValueError("a leaf certificate needs at least one DNS name or IP address")
        key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        names: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
        names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        certificate = (
            _builder(
                _name(common_name), self.certificate.subject, key.public_key(), now, valid_days
            )
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(ca=False), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
            .sign(self.key, hashes.SHA256())
        )
        return Issued(certificate, key)
