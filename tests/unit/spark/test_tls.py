"""The connector's TLS options (services/spark/options.py ``tls_options``,
services/spark/client.py ``tls_context``; docs/spark.md, "TLS"): ``caFile`` (or the
variable QUIRE_CA_FILE), ``certFile`` and ``keyFile`` are checked on the driver, a file
that cannot be used refused naming its option; every read and write, batch and
streaming, carries them to its clients, which survive pickling to executors; a process
builds one context per (CA, certificate, key) and builds it again only when a file
changes; a gateway whose certificate does not verify, or that refuses the handshake,
fails the call at once, naming the gateway and the CA bundle or the client certificate,
or sends it to the next gateway; a connection closed on a client without a certificate
says which options give one."""

from __future__ import annotations

import os
import pickle
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from services.spark import client as client_module
from services.spark import limits as spark_limits
from services.spark.client import QuireSparkError, SparkGatewayClient, TlsOptions, tls_context
from services.spark.ingest import IngestClient, WriteOptions
from services.spark.jobs import common
from services.spark.options import CA_FILE_VARIABLE, parse_read_options, tls_options
from services.spark.stream_read import QuireStreamReader
from services.tls.certificates import CertificateAuthority

GW = "https://127.0.0.1:8443"


@pytest.fixture
def pki(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory with a CA (ca.pem) and a client certificate it signed (cert.pem,
    key.pem); no QUIRE_CA_FILE; the process's contexts forgotten before and after."""
    monkeypatch.delenv(CA_FILE_VARIABLE, raising=False)
    ca = CertificateAuthority.create("spark test CA")
    ca.write(tmp_path / "ca.pem", tmp_path / "ca.key")
    ca.issue("spark", ["localhost"]).write(tmp_path / "cert.pem", tmp_path / "key.pem")
    client_module._context.cache_clear()
    yield tmp_path
    client_module._context.cache_clear()


def test_every_read_and_write_carries_the_tls_options(pki: Path) -> None:
    """Batch and streaming reads and writes (a streaming write parses a batch write's
    options) take caFile, certFile and keyFile (keys in any case) into their options and
    their clients, which keep them when pickled to an executor."""
    given = {
        "gateway": GW,
        "log": "orders",
        "CAFILE": str(pki / "ca.pem"),
        "certFile": str(pki / "cert.pem"),
        "keyfile": str(pki / "key.pem"),
    }
    expected = TlsOptions(str(pki / "ca.pem"), str(pki / "cert.pem"), str(pki / "key.pem"))
    assert parse_read_options(given).tls == expected
    write = WriteOptions.parse(given)
    assert write.tls == expected and IngestClient(write).gateway.tls == expected
    schema = StructType([StructField("data", BinaryType())])
    source = QuireStreamReader(given, schema)
    assert pickle.loads(pickle.dumps(source)).client.gateway.tls == expected
    travelled = pickle.loads(pickle.dumps(SparkGatewayClient(GW, "tok", tls=expected)))
    assert (travelled.tls, travelled.token, travelled.url) == (expected, "tok", GW)


def test_the_variable_is_the_default_and_paths_are_made_absolute(
    pki: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without caFile the driver's QUIRE_CA_FILE names the bundle; a relative path is
    made absolute on the driver (an executor runs in another directory); the option
    wins over the variable."""
    monkeypatch.chdir(pki)
    monkeypatch.setenv(CA_FILE_VARIABLE, "ca.pem")
    tls = tls_options({"gateway": GW})
    assert (
        tls.ca_file == str(pki / "ca.pem") and tls.ca_source == f"the variable {CA_FILE_VARIABLE}"
    )
    other = pki / "other.pem"
    other.write_bytes(CertificateAuthority.create("other").certificate_pem())
    assert tls_options({"caFile": "other.pem"}).ca_file == str(other)
    monkeypatch.delenv(CA_FILE_VARIABLE)
    assert tls_options({"gateway": GW}) == TlsOptions()


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"caFile": "missing.pem"}, "option 'caFile': {dir}/missing.pem: No such file"),
        ({"caFile": "key.pem"}, "option 'caFile': {dir}/key.pem: not a PEM CA bundle"),
        ({"certFile": "cert.pem"}, "give both options 'certFile' and 'keyFile'"),
        ({"keyFile": "key.pem"}, "give both options 'certFile' and 'keyFile'"),
        ({"certFile": "ca.pem", "keyFile": "key.pem"}, "options 'certFile' and 'keyFile'"),
        ({"certFile": "cert.pem", "keyFile": "nokey.pem"}, "option 'keyFile': {dir}/nokey.pem"),
    ],
)
def test_a_file_that_cannot_be_used_is_refused_naming_its_option(
    pki: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, str], says: str
) -> None:
    """A missing CA bundle, one that is not PEM, a certificate without its key, a key
    that does not match: refused when the options are read (on the driver, at
    planning), code invalid_option, naming the option and the file."""
    monkeypatch.chdir(pki)
    for parse in (parse_read_options, WriteOptions.parse):
        with pytest.raises(QuireSparkError) as caught:
            parse({"gateway": GW, "log": "orders", **options})
        assert caught.value.code == "invalid_option"
        assert says.format(dir=pki) in str(caught.value)
        assert "BEGIN" not in str(caught.value)  # never a file's content


def test_a_missing_file_named_by_the_variable_names_the_variable(
    pki: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CA_FILE_VARIABLE, str(pki / "gone.pem"))
    with pytest.raises(QuireSparkError, match=f"the variable {CA_FILE_VARIABLE}: .*gone.pem"):
        parse_read_options({"gateway": GW, "log": "orders"})


def test_one_context_per_files_until_a_file_changes(pki: Path) -> None:
    """A process keeps one context per (CA, certificate, key): every client, and every
    client unpickled in it, uses that one; another CA gets another; a CA bundle
    rewritten is read again (a rotation reaches long-lived Python workers)."""
    tls = TlsOptions(str(pki / "ca.pem"))
    first = tls_context(tls)
    clients = [SparkGatewayClient(GW, tls=tls) for _ in range(3)]
    clients.append(pickle.loads(pickle.dumps(clients[0])))
    for each in clients:
        assert each.http is not None
        each.close()
    assert client_module._context.cache_info().misses == 1
    assert tls_context(TlsOptions(str(pki / "ca.pem"), ca_source="elsewhere")) is first
    with_cert = TlsOptions(str(pki / "ca.pem"), str(pki / "cert.pem"), str(pki / "key.pem"))
    assert tls_context(with_cert) is not first
    assert tls_context(TlsOptions()) is not first

    stamp = os.stat(pki / "ca.pem").st_mtime_ns
    os.utime(pki / "ca.pem", ns=(stamp + 10**9, stamp + 10**9))
    assert tls_context(tls) is not first
    assert tls_context(tls) is tls_context(tls)


def refused_by_verification(request: httpx.Request) -> httpx.Response:
    """What httpx raises when the gateway's certificate does not verify."""
    cause = ssl.SSLCertVerificationError(1, "certificate verify failed")
    cause.verify_message = "unable to get local issuer certificate"
    raise httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED]", request=request) from cause


def test_an_unverified_gateway_fails_at_once_naming_it_and_the_ca(
    pki: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A certificate that does not verify is not waited for (no retries over the budget):
    the call fails with gateway_not_verified, naming the gateway's URL, the CA bundle and
    where it was named, and OpenSSL's reason; a range read likewise."""
    monkeypatch.setattr(spark_limits, "RETRY_DELAY_S", 10.0)  # a retry would show
    calls: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(str(request.url.host))
        return refused_by_verification(request)

    tls = TlsOptions(str(pki / "ca.pem"))
    with SparkGatewayClient(GW, tls=tls, transport=httpx.MockTransport(answer)) as client:
        with pytest.raises(QuireSparkError) as caught:
            client.request("GET", "/v1/logs/x")
        assert caught.value.code == "gateway_not_verified"
        text = str(caught.value)
        assert f"the certificate of {GW} is not verified by the CA bundle" in text
        assert f"{pki / 'ca.pem'} (option 'caFile')" in text
        assert "unable to get local issuer certificate" in text
        with pytest.raises(QuireSparkError, match="gateway_not_verified"):
            list(client.read_range(1, 0, 1))
    assert calls == ["127.0.0.1", "127.0.0.1"]

    with SparkGatewayClient(GW, transport=httpx.MockTransport(answer)) as client:
        with pytest.raises(QuireSparkError, match="system's CA bundle .* 'caFile'"):
            client.request("GET", "/v1/logs/x")


def test_an_unverified_gateway_sends_the_call_to_the_next() -> None:
    """With several gateways, one whose certificate does not verify is passed over like
    one that refuses connections."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.host == "g1":
            return refused_by_verification(request)
        return httpx.Response(200, json={"name": "x"})

    gateways = "https://g1:8443,https://g2:8443"
    with SparkGatewayClient(gateways, transport=httpx.MockTransport(answer)) as client:
        assert client.request("GET", "/v1/logs/x") == {"name": "x"}
        assert client.url == "https://g2:8443"


def refused_handshake(request: httpx.Request) -> httpx.Response:
    """What httpx raises when a gateway requiring client certificates gets none (TLS 1.3
    sends the alert after the handshake: the first read gets it)."""
    cause = ssl.SSLError(1, "[SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] alert")
    cause.reason = "TLSV13_ALERT_CERTIFICATE_REQUIRED"
    raise httpx.ReadError("[SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED]", request=request) from cause


def test_a_refused_handshake_fails_at_once_saying_which_certificate(
    pki: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gateway that refuses the handshake served no request: any call, an append too,
    goes to the next gateway, and past the last fails at once with gateway_tls_refused,
    OpenSSL's reason and the client certificate shown (none, or the certFile)."""
    monkeypatch.setattr(spark_limits, "RETRY_DELAY_S", 10.0)  # a retry would show
    calls: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(str(request.url.host))
        return refused_handshake(request)

    gateways = "https://g1:8443,https://g2:8443"
    with SparkGatewayClient(gateways, transport=httpx.MockTransport(answer)) as client:
        with pytest.raises(QuireSparkError) as caught:
            client.request("POST", "/v1/ledgers/1/entries", repeatable=False)
    assert calls == ["g1", "g2"]
    assert caught.value.code == "gateway_tls_refused"
    assert "https://g2:8443 refused the TLS handshake (TLSV13_ALERT_CERTIFICATE_REQUIRED)" in str(
        caught.value
    )
    assert "certificate shown: none (a client certificate is given with the options" in str(
        caught.value
    )
    tls = TlsOptions(str(pki / "ca.pem"), str(pki / "cert.pem"), str(pki / "key.pem"))
    with SparkGatewayClient(GW, tls=tls, transport=httpx.MockTransport(answer)) as client:
        with pytest.raises(QuireSparkError, match=f"shown: the certificate {pki / 'cert.pem'}"):
            client.request("GET", "/v1/logs/x")


def test_a_closed_https_connection_without_a_certificate_says_how_to_give_one(
    pki: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gateway requiring client certificates closes the connection of a client without
    one, no alert sent: the failure (retried like any other) names the options that give
    a certificate; over http, or with a certificate shown, no such hint."""
    monkeypatch.setattr(spark_limits, "RETRY_BUDGET_S", 0.0)

    def closed(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")

    hint = "no client certificate was shown: if the gateway requires one, give the options"
    with_certificate = TlsOptions(str(pki / "ca.pem"), str(pki / "cert.pem"), str(pki / "key.pem"))
    for url, tls, hinted in [
        (GW, TlsOptions(), True),
        ("http://127.0.0.1:8080", TlsOptions(), False),
        (GW, with_certificate, False),
    ]:
        with SparkGatewayClient(url, tls=tls, transport=httpx.MockTransport(closed)) as client:
            with pytest.raises(QuireSparkError) as caught:
                client.request("GET", "/v1/logs/x")
        assert caught.value.code == "gateway_unreachable"
        assert (hint in str(caught.value)) == hinted, caught.value


def test_the_example_jobs_take_a_ca_file() -> None:
    """The example jobs' --ca-file becomes the option caFile (docs/spark.md, "The example
    jobs"); without it the option is left out, so QUIRE_CA_FILE still applies."""
    args = common.parser("a job").parse_args(["--gateway", GW, "--ca-file", "/etc/quire/ca.pem"])
    assert common.connection(args) == {"gateway": GW, "caFile": "/etc/quire/ca.pem"}
    assert common.connection(common.parser("a job").parse_args(["--gateway", GW])) == {
        "gateway": GW
    }
