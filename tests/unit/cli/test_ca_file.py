"""The CLI's CA bundle (``--ca-file`` / ``QUIRE_CA_FILE``, services/cli/client.py) and the
certificates of ``quire up --tls`` (services/cluster/tls.py)."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest
from cryptography import x509

from services.cli.client import GatewayClient, tls_context
from services.cluster.config import ClusterError
from services.cluster.tls import LocalTls
from services.errors import GatewayUnreachable, InvalidArgument
from services.tls.certificates import CertificateAuthority


def test_a_bundle_is_loaded_once_per_process_and_a_bad_one_named(tmp_path: Path) -> None:
    ca = CertificateAuthority.create("test CA")
    ca.write(tmp_path / "ca.pem", tmp_path / "ca.key")
    context = tls_context(tmp_path / "ca.pem")
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert tls_context(tmp_path / "ca.pem") is context
    assert tls_context(None) is None
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(InvalidArgument, match=r"--ca-file: .*junk.pem: not a PEM CA bundle"):
        tls_context(tmp_path / "junk.pem")


@pytest.mark.parametrize(
    ("url", "failure", "expected"),
    [
        (
            "https://gw:8443",
            httpx.ConnectError(
                "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed "
                "certificate in certificate chain (_ssl.c:1006)"
            ),
            "presented a certificate that does not verify (self-signed certificate in "
            "certificate chain); give the CA bundle that signed it with --ca-file or "
            "QUIRE_CA_FILE",
        ),
        (
            "https://gw:8080",
            httpx.ConnectError("[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)"),
            "does not speak TLS: use an http:// URL",
        ),
        (
            "http://gw:8443",
            httpx.RemoteProtocolError("Server disconnected without sending a response."),
            "closed the connection without an answer (does it serve https://?)",
        ),
    ],
)
def test_tls_failures_say_what_to_change(url: str, failure: Exception, expected: str) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise failure

    with (
        GatewayClient(url, transport=httpx.MockTransport(refuse)) as client,
        pytest.raises(GatewayUnreachable) as raised,
    ):
        client.request("GET", "/v1/ledgers")
    assert raised.value.message == f"the gateway at {url} {expected}"


def test_quire_up_keeps_its_ca_and_issues_each_service_a_certificate(tmp_path: Path) -> None:
    first = LocalTls.prepare(tmp_path / "tls", "127.0.0.1")
    files = first.issue("gateway")
    assert (tmp_path / "tls").stat().st_mode & 0o777 == 0o700
    assert files.key.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "tls" / "ca.key").stat().st_mode & 0o777 == 0o600
    leaf = x509.load_pem_x509_certificate(files.cert.read_bytes())
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert leaf.issuer == first.authority.certificate.subject

    again = LocalTls.prepare(tmp_path / "tls", "quire.example")
    assert again.authority.certificate == first.authority.certificate
    other = x509.load_pem_x509_certificate(again.issue("bookie-1").cert.read_bytes())
    names = other.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost", "quire.example"]

    (tmp_path / "tls" / "ca.key").write_text("damaged")
    with pytest.raises(ClusterError, match="remove .* to make a new one"):
        LocalTls.prepare(tmp_path / "tls", "127.0.0.1")
