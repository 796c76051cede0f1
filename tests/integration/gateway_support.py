"""Helpers of the gateway integration tests: a small HTTP client of the Ledgers API, a
cluster of bookies and gateways, and a client that appends in the background and
records every acknowledged entry."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from kazoo.client import KazooClient

from services.cluster.processes import ServiceProcess, default_verify
from services.tls.certificates import CertificateAuthority
from services.tls.contexts import TlsFiles
from services.zk.auth import load_credentials
from tests.harness import Cluster, fresh_chroot, wait_for

# Small enough to keep the tests fast, big enough to cross a few pages.
PAYLOAD_PREFIX = b"quire-entry-"


class Gateway:
    """A gateway process seen through HTTP (one keep-alive client per instance)."""

    def __init__(
        self,
        proc: ServiceProcess,
        token: str | None = None,
        timeout_s: float = 30.0,
        local_address: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """``local_address`` binds the client's side (e.g. "127.0.0.3"): the gateway sees
        another client address, with its own wrong-password budget. ``transport`` carries
        the calls another way: from a host of tests/multihost/, say."""
        self.proc = proc
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if local_address:
            transport = httpx.HTTPTransport(local_address=local_address)
        self.http = httpx.Client(
            base_url=proc.url,
            headers=headers,
            timeout=timeout_s,
            transport=transport,
            verify=proc.client_context() or default_verify(),  # a TLS gateway: its test CA
        )

    @property
    def url(self) -> str:
        return self.proc.url

    def close_client(self) -> None:
        self.http.close()

    # ------------------------------------------------------------ raw calls

    def request(self, method: str, path: str, **kw) -> httpx.Response:  # type: ignore[no-untyped-def]
        return self.http.request(method, path, **kw)

    # ------------------------------------------------------------ checked calls

    def create(self, password: str | None = None, **body) -> dict:  # type: ignore[no-untyped-def]
        if password is not None:
            body["password"] = password
        r = self.http.post("/v1/ledgers", json=body)
        assert r.status_code == 201, r.text
        return r.json()

    def add(self, lid: int, payload: bytes, password: str | None = None) -> dict:
        r = self.http.post(
            f"/v1/ledgers/{lid}/entries",
            content=payload,
            headers={"Content-Type": "application/octet-stream", **_pw(password)},
        )
        assert r.status_code == 200, r.text
        return r.json()

    def add_batch(self, lid: int, payloads: list[bytes], password: str | None = None) -> dict:
        r = self.http.post(
            f"/v1/ledgers/{lid}/entries",
            json={"entries": [base64.b64encode(p).decode() for p in payloads]},
            headers=_pw(password),
        )
        assert r.status_code == 200, r.text
        return r.json()

    def metadata(self, lid: int) -> dict:
        r = self.http.get(f"/v1/ledgers/{lid}")
        assert r.status_code == 200, r.text
        return r.json()

    def lac(self, lid: int, password: str | None = None, **params: int) -> int:
        r = self.http.get(f"/v1/ledgers/{lid}/lac", params=params, headers=_pw(password))
        assert r.status_code == 200, r.text
        return r.json()["last_add_confirmed"]

    def close(self, lid: int, password: str | None = None) -> dict:
        r = self.http.post(f"/v1/ledgers/{lid}/close", headers=_pw(password))
        assert r.status_code == 200, r.text
        return r.json()

    def recover(self, lid: int, password: str | None = None) -> dict:
        r = self.http.post(f"/v1/ledgers/{lid}/recover", headers=_pw(password))
        assert r.status_code == 200, r.text
        return r.json()

    def page(self, lid: int, password: str | None = None, **params: int) -> dict:
        r = self.http.get(f"/v1/ledgers/{lid}/entries", params=params, headers=_pw(password))
        assert r.status_code == 200, r.text
        return r.json()

    def read_all(self, lid: int, password: str | None = None) -> list[tuple[int, bytes]]:
        """Every readable entry, following ``next`` until it is null."""
        out: list[tuple[int, bytes]] = []
        params: dict[str, int] = {}
        for _ in range(10_000):
            page = self.page(lid, password, **params)
            out += [(e["entry_id"], base64.b64decode(e["data"])) for e in page["entries"]]
            if page["next"] is None:
                return out
            params = {"from": page["next"]}
        raise AssertionError("paging never ended")

    def read_ndjson(self, lid: int, password: str | None = None) -> list[tuple[int, bytes]]:
        headers = {"Accept": "application/x-ndjson", **_pw(password)}
        r = self.http.get(f"/v1/ledgers/{lid}/entries", headers=headers)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("application/x-ndjson")
        out = []
        for line in r.text.splitlines():
            doc = json.loads(line)
            assert set(doc) == {"entry_id", "data"}, doc
            out.append((doc["entry_id"], base64.b64decode(doc["data"])))
        return out

    def entry(self, lid: int, eid: int, password: str | None = None) -> bytes:
        r = self.http.get(f"/v1/ledgers/{lid}/entries/{eid}", headers=_pw(password))
        assert r.status_code == 200, r.text
        return r.content

    def metrics(self) -> str:
        r = self.http.get("/metrics")
        assert r.status_code == 200, r.text
        return r.text


def _pw(password: str | None) -> dict[str, str]:
    return {"X-Ledger-Password": password} if password is not None else {}


def metric_value(text: str, name: str, labels: str = "") -> float:
    """The value of one sample in Prometheus text (0 when absent)."""
    wanted = f"{name}{{{labels}}}" if labels else name
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        if key == wanted:
            return float(value)
    return 0.0


def assert_error(r: httpx.Response, status: int, code: str) -> None:
    """A docs/api.md error: the status, and a body of exactly ``{"error", "message"}``."""
    assert r.status_code == status, (r.status_code, r.text)
    doc = r.json()
    assert set(doc) == {"error", "message"}, doc
    assert doc["error"] == code, doc
    assert isinstance(doc["message"], str) and doc["message"], doc


# ------------------------------------------------------------------ clusters


def start_bookies(cluster: Cluster, count: int, extra_args: list[str] | None = None):  # type: ignore[no-untyped-def]
    return cluster.start_bookies(count, extra_args)


def start_gateway(
    cluster: Cluster, extra_args: list[str] | None = None, token: str | None = None
) -> Gateway:
    proc = cluster.start("gateway", extra_args or [])
    return Gateway(proc, token=token)


def wait_writable(gateway: Gateway, count: int, deadline_s: float = 20.0) -> None:
    """Wait until the gateway can place an ensemble of ``count`` bookies (creates and
    deletes a probe ledger), so tests do not race the registry view."""

    def ok() -> bool:
        r = gateway.http.post(
            "/v1/ledgers",
            json={"ensemble_size": count, "write_quorum": 1, "ack_quorum": 1},
        )
        if r.status_code != 201:
            return False
        gateway.http.delete(f"/v1/ledgers/{r.json()['ledger_id']}")
        return True

    wait_for(ok, deadline_s, f"{count} writable bookies seen by the gateway")


def log_text(cluster: Cluster) -> str:
    return "\n".join(
        Path(p.log_path).read_text(errors="replace")
        for p in cluster.processes
        if Path(p.log_path).exists()
    )


# ------------------------------------------------------------------ background appender


def payload_for(n: int, size: int = 64) -> bytes:
    head = PAYLOAD_PREFIX + str(n).encode() + b"-"
    return head + bytes((n * 7 + i) % 251 for i in range(max(0, size - len(head))))


@dataclass
class Appender:
    """Appends to one ledger in a background thread until stopped or an add fails;
    records each acknowledged entry id with its bytes, and every payload sent."""

    url: str
    ledger_id: int
    batch: int = 1  # entries per request; 1 = raw single-entry adds
    password: str | None = None
    token: str | None = None
    timeout_s: float = 30.0
    # Carries the calls another way: from a host of tests/multihost/, say.
    transport: httpx.BaseTransport | None = None
    acked: dict[int, bytes] = field(default_factory=dict)
    sent: set[bytes] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._counter = 0

    def start(self) -> Appender:
        self._thread.start()
        return self

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, join_s: float = 60.0) -> None:
        self._stop.set()
        self._thread.join(join_s)
        assert not self._thread.is_alive(), "the appender did not stop"

    def wait_count(self, count: int, deadline_s: float = 30.0) -> None:
        wait_for(
            lambda: self.count >= count or not self.running,
            deadline_s,
            f"{count} acknowledged entries",
        )
        assert self.count >= count, f"appender stopped early: {self.errors}"

    def _headers(self) -> dict[str, str]:
        headers = _pw(self.password)
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def _run(self) -> None:
        client = httpx.Client(
            base_url=self.url,
            timeout=self.timeout_s,
            transport=self.transport,
            verify=default_verify(),
        )
        with client as http:
            path = f"/v1/ledgers/{self.ledger_id}/entries"
            while not self._stop.is_set():
                payloads = [payload_for(self._counter + i) for i in range(self.batch)]
                self._counter += self.batch
                self.sent.update(payloads)
                try:
                    if self.batch == 1:
                        r = http.post(
                            path,
                            content=payloads[0],
                            headers={
                                "Content-Type": "application/octet-stream",
                                **self._headers(),
                            },
                        )
                    else:
                        r = http.post(
                            path,
                            json={"entries": [base64.b64encode(p).decode() for p in payloads]},
                            headers=self._headers(),
                        )
                except httpx.HTTPError as exc:
                    self.errors.append(repr(exc))
                    return
                self.statuses.append(r.status_code)
                if r.status_code != 200:
                    self.errors.append(f"{r.status_code} {r.text}")
                    return
                doc = r.json()
                first = doc.get("first_entry_id", doc.get("entry_id"))
                assert doc["last_add_confirmed"] >= doc.get("last_entry_id", first)
                with self._lock:
                    for i, payload in enumerate(payloads):
                        self.acked[first + i] = payload


def check_read_back(
    entries: list[tuple[int, bytes]], last_entry_id: int, acked: dict[int, bytes], sent: set
) -> None:
    """Persistence and agreement: ids 0..last in order with no gap, every acknowledged
    entry byte-exact, every other entry one of the payloads the client sent."""
    assert [eid for eid, _ in entries] == list(range(last_entry_id + 1))
    if acked:
        assert last_entry_id >= max(acked), (last_entry_id, max(acked))
    for eid, data in entries:
        if eid in acked:
            assert data == acked[eid], f"entry {eid} differs"
        else:
            assert data in sent, f"entry {eid} was never sent"


def loopback_tls(base: Path, ca_name: str) -> tuple[CertificateAuthority, TlsFiles]:
    """A test CA and one certificate for every service on loopback (localhost,
    127.0.0.1), written under ``base`` (ca.pem, ca.key, cert.pem, key.pem)."""
    ca = CertificateAuthority.create(ca_name)
    ca.write(base / "ca.pem", base / "ca.key")
    ca.issue("services", ["localhost"], ["127.0.0.1"]).write(base / "cert.pem", base / "key.pem")
    return ca, TlsFiles(base / "cert.pem", base / "key.pem", base / "ca.pem")


@contextmanager
def module_cluster(  # type: ignore[no-untyped-def]
    zookeeper,
    base_dir: Path,
    secret: str | None = None,
    tls: TlsFiles | None = None,
    zk_auth_file: Path | None = None,
) -> Iterator[Cluster]:
    """A cluster shared by the tests of one module (its own chroot), stopped by pid and
    its chroot deleted at the end, also on failure; every service over TLS with ``tls``,
    and with the ZooKeeper credentials of ``zk_auth_file`` (which delete the chroot)."""
    root = fresh_chroot()
    c = Cluster(zookeeper.connect_string, root, base_dir, secret, tls, zk_auth_file)
    credentials = load_credentials(zk_auth_file, None)
    try:
        yield c
    finally:
        c.stop_all()
        client = KazooClient(
            hosts=zookeeper.connect_string,
            timeout=10.0,
            auth_data=credentials.auth_data() if credentials else None,
        )
        client.start(10.0)
        try:
            client.delete(root, recursive=True)
        except Exception:  # noqa: BLE001 - cleanup is best effort
            pass
        finally:
            client.stop()
            client.close()


@contextmanager
def one_gateway(  # type: ignore[no-untyped-def]
    zookeeper,
    base_dir: Path,
    bookie_args: list[str] | None = None,
    gateway_args: list[str] | None = None,
) -> Iterator[tuple[Cluster, list[ServiceProcess], Gateway]]:
    """A module's cluster of three bookies (with ``bookie_args``) and a gateway (with
    ``gateway_args``) that sees them writable; the gateway's client is closed at the end."""
    with module_cluster(zookeeper, base_dir) as cluster:
        bookies = start_bookies(cluster, 3, bookie_args)
        gateway = start_gateway(cluster, gateway_args)
        try:
            wait_writable(gateway, 3)
            yield cluster, bookies, gateway
        finally:
            gateway.close_client()


@contextmanager
def two_gateways(zookeeper, base_dir: Path) -> Iterator[tuple[Cluster, Gateway, Gateway]]:  # type: ignore[no-untyped-def]
    """A module's cluster of three bookies and two gateways that both see them writable;
    the gateways' clients are closed at the end."""
    with module_cluster(zookeeper, base_dir) as cluster:
        start_bookies(cluster, 3)
        a = start_gateway(cluster)
        b = start_gateway(cluster)
        wait_writable(a, 3)
        wait_writable(b, 3)
        try:
            yield cluster, a, b
        finally:
            a.close_client()
            b.close_client()


@contextmanager
def patient_writer(  # type: ignore[no-untyped-def]
    zookeeper, base_dir: Path
) -> Iterator[tuple[list[ServiceProcess], Gateway, Gateway]]:
    """Three bookies and two gateways that see them writable: ``a`` writes with a 60 s
    add time-out, so that a bookie a test pauses is waited for rather than replaced (no
    ensemble change), and ``b`` recovers and reads afterwards. The gateways' clients are
    closed at the end, the processes stopped by the cluster."""
    with module_cluster(zookeeper, base_dir) as cluster:
        bookies = start_bookies(cluster, 3)
        a = start_gateway(cluster, ["--bookie-add-timeout-ms", "60000"])
        b = start_gateway(cluster)
        try:
            wait_writable(a, 3)
            wait_writable(b, 3)
            yield bookies, a, b
        finally:
            a.close_client()
            b.close_client()


def ok(r: httpx.Response, status: int = 200) -> Any:
    """The JSON body of an answer that must have ``status`` (None for 204)."""
    assert r.status_code == status, (r.status_code, r.text)
    return r.json() if status != 204 else None


def closed_ledger_and_log(gateway: Gateway, log: str) -> int:
    """On a gateway with one writable bookie: a CLOSED ledger holding ``b"zero"`` and
    ``b"one"`` (its id is returned), and log ``log`` with this gateway as its writer and
    one record — something of each kind for a fuzzer's path parameters to name."""
    ledger_id = int(gateway.create(ensemble_size=1, write_quorum=1, ack_quorum=1)["ledger_id"])
    gateway.add(ledger_id, b"zero")
    gateway.add(ledger_id, b"one")
    gateway.close(ledger_id)
    body = {"ensemble_size": 1, "write_quorum": 1, "ack_quorum": 1}
    ok(gateway.request("PUT", f"/v1/logs/{log}", json=body), 201)
    ok(gateway.request("POST", f"/v1/logs/{log}/writer"))
    ok(gateway.request("POST", f"/v1/logs/{log}/records", content=b"record"))
    return ledger_id
