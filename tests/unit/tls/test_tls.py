"""The TLS contexts and the local CA (services/tls/, docs/security.md "TLS"): who may
complete a handshake with whom, and the reload of the files in place."""

from __future__ import annotations

import ipaddress
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from services.settings import BookieSettings, GatewaySettings, load_settings
from services.tls.certificates import CertificateAuthority, Issued
from services.tls.contexts import TlsContexts, TlsError, TlsFiles, client_context
from services.web.serve import tls_contexts

HANDSHAKE_ROUNDS_MAX = 10


def _files(directory: Path, ca: CertificateAuthority, leaf: Issued, auth: bool) -> TlsFiles:
    ca.write(directory / "ca.pem", directory / "ca.key")
    leaf.write(directory / "cert.pem", directory / "key.pem")
    return TlsFiles(directory / "cert.pem", directory / "key.pem", directory / "ca.pem", auth)


def handshake(
    server: ssl.SSLContext, client: ssl.SSLContext, server_hostname: str
) -> x509.Certificate:
    """A TLS handshake over memory buffers; the certificate the server presented."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client_side = client.wrap_bio(c_in, c_out, server_hostname=server_hostname)
    server_side = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(HANDSHAKE_ROUNDS_MAX):
        for name, side in (("client", client_side), ("server", server_side)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
            s_in.write(c_out.read())
            c_in.write(s_out.read())
        if all(done.values()):
            # TLS 1.3: the server checks the client's certificate after its own flight;
            # a refusal reaches the client on its first read.
            client_side.write(b"x")
            s_in.write(c_out.read())
            assert server_side.read(1) == b"x"
            der = client_side.getpeercert(binary_form=True)
            assert der is not None
            return x509.load_der_x509_certificate(der)
    raise AssertionError("the handshake did not finish")


@pytest.fixture
def ca() -> CertificateAuthority:
    return CertificateAuthority.create("test CA")


def test_leaf_names_and_key_file(tmp_path: Path, ca: CertificateAuthority) -> None:
    """A leaf carries its DNS names and IPs as subject alternative names, is signed by
    the CA, and its key file is readable by its owner only."""
    leaf = ca.issue("bookie-1", ["bookie-1.example", "localhost"], ["127.0.0.1", "::1"])
    files = _files(tmp_path, ca, leaf, auth=False)
    names = leaf.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert names.value.get_values_for_type(x509.DNSName) == ["bookie-1.example", "localhost"]
    assert names.value.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]
    leaf.certificate.verify_directly_issued_by(ca.certificate)
    assert stat.S_IMODE(files.key.stat().st_mode) == 0o600
    loaded = CertificateAuthority.load(tmp_path / "ca.pem", tmp_path / "ca.key")
    assert loaded.certificate == ca.certificate
    with pytest.raises(ValueError, match="at least one"):
        ca.issue("nameless")


def test_peer_verified_by_ca_and_name(tmp_path: Path, ca: CertificateAuthority) -> None:
    """A client completes a handshake only with a server whose certificate the CA signed
    and names the host it dialled, by DNS name or IP address."""
    tls = TlsContexts(_files(tmp_path, ca, ca.issue("gw", ["localhost"], ["127.0.0.1"]), False))
    assert handshake(tls.server, tls.client, "127.0.0.1").subject == x509.Name(
        [x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "gw")]
    )
    handshake(tls.server, tls.client, "localhost")
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        handshake(tls.server, tls.client, "127.0.0.2")
    other = tmp_path / "other"
    other.mkdir()
    stranger = CertificateAuthority.create("another CA")
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        handshake(
            tls.server,
            client_context(_files(other, stranger, stranger.issue("x", ["x"]), False)),
            "127.0.0.1",
        )


def test_client_auth(tmp_path: Path, ca: CertificateAuthority) -> None:
    """With client auth the server refuses a client without a certificate signed by the
    CA, and accepts a service's own client context (it carries the certificate)."""
    tls = TlsContexts(_files(tmp_path, ca, ca.issue("b", ["localhost"], ["127.0.0.1"]), True))
    handshake(tls.server, tls.client, "127.0.0.1")
    anonymous = ssl.create_default_context(cafile=tls.files.ca)
    with pytest.raises(ssl.SSLError, match="did not return a certificate"):
        handshake(tls.server, anonymous, "127.0.0.1")
    stranger = CertificateAuthority.create("another CA")
    foreign = client_context(
        TlsFiles(tls.files.cert, tls.files.key, tls.files.ca)  # trusts our CA...
    )
    stranger.issue("intruder", ["localhost"]).write(tmp_path / "i.pem", tmp_path / "i.key")
    foreign.load_cert_chain(tmp_path / "i.pem", tmp_path / "i.key")  # ...shows another's
    with pytest.raises(ssl.SSLError, match="certificate verify failed"):
        handshake(tls.server, foreign, "127.0.0.1")


def test_reload_in_place(tmp_path: Path, ca: CertificateAuthority) -> None:
    """A reload puts the new certificate into the same live contexts; a bad pair is
    refused whole and the old certificate stays in use."""
    files = _files(tmp_path, ca, ca.issue("old", ["localhost"]), auth=False)
    tls = TlsContexts(files)
    server, client = tls.server, tls.client
    new = ca.issue("new", ["localhost"])
    new.write(files.cert, files.key)
    tls.reload()
    assert tls.server is server and tls.client is client
    assert handshake(server, client, "localhost").serial_number == new.certificate.serial_number

    files.key.write_bytes(ca.issue("stray", ["localhost"]).key_pem())  # not the cert's key
    with pytest.raises(TlsError, match="matching key"):
        tls.reload()
    assert handshake(server, client, "localhost").serial_number == new.certificate.serial_number
    tls.reload_logged()  # logs, does not raise


def test_errors_name_the_file(tmp_path: Path, ca: CertificateAuthority) -> None:
    """A missing, unusable or encrypted file is one message naming it, with none of its
    content (an encrypted key is never prompted for)."""
    files = _files(tmp_path, ca, ca.issue("s", ["localhost"]), auth=False)
    missing = TlsFiles(files.cert, files.key, tmp_path / "nope.pem")
    with pytest.raises(TlsError, match="nope.pem: no such file"):
        TlsContexts(missing)
    encrypted = ca.issue("s", ["localhost"]).key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )
    (tmp_path / "encrypted.key").write_bytes(encrypted)
    with pytest.raises(TlsError, match="encrypted.key: the key is encrypted"):
        TlsContexts(TlsFiles(files.cert, tmp_path / "encrypted.key", files.ca))
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(TlsError, match="junk.pem: not a PEM CA bundle"):
        TlsContexts(TlsFiles(files.cert, files.key, tmp_path / "junk.pem"))


def test_tls_flags_go_together(capsys: pytest.CaptureFixture[str]) -> None:
    """TLS is on with all three of --tls-cert, --tls-key and --tls-ca; some of them, or
    --tls-client-auth without them, stop the service at start-up with one line
    (docs/api.md, "Processes and how they start")."""
    assert load_settings(GatewaySettings, []).tls_files is None
    files = load_settings(
        BookieSettings,
        ["--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-ca", "ca.pem", "--tls-client-auth"],
    ).tls_files
    assert files == TlsFiles(Path("c.pem"), Path("k.pem"), Path("ca.pem"), client_auth=True)
    for argv in (["--tls-cert", "c.pem"], ["--tls-client-auth"]):
        with pytest.raises(SystemExit) as stopped:
            load_settings(GatewaySettings, argv, prog="gw")
        assert stopped.value.code == 2
        line = capsys.readouterr().err
        assert line.startswith("gw: error: --tls-") and line.count("\n") == 1, line


def test_unusable_files_stop_the_service(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A TLS file that cannot be used stops the service at start-up with one line naming
    it (services/web/serve.py, ``tls_contexts``)."""
    argv = ["--tls-cert", str(tmp_path / "c.pem"), "--tls-key", "k.pem", "--tls-ca", "ca.pem"]
    with pytest.raises(SystemExit) as stopped:
        tls_contexts(load_settings(GatewaySettings, argv), "gw")
    assert stopped.value.code == 2
    assert capsys.readouterr().err == f"gw: error: TLS: {tmp_path / 'c.pem'}: no such file\n"
