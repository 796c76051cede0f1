"""Helpers of the bookie integration tests: sealed records, a small HTTP client, metrics,
raw HTTP/1.1 connections for cheap concurrent load."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

from services.cluster.processes import ServiceProcess, default_verify, poll_client, tail
from services.wire import digest, framing
from services.wire.framing import FramedRecord


def sealed(
    lid: int, eid: int, payload: bytes | None = None, recovery: bool = False, lac: int | None = None
) -> FramedRecord:
    payload = payload if payload is not None else f"entry {lid}/{eid}".encode()
    lac = eid - 1 if lac is None else lac
    record = FramedRecord(lid, eid, lac, payload, b"", recovery, "crc32c", (eid + 1) * 10)
    return digest.seal(record)


STATE_KEYS = ("ledger_id", "lac", "last_entry_id", "fenced")


def state(doc: dict) -> dict:
    """The ledger-state part of a LAC or fence answer (without lengths and instance id),
    after checking that those are there."""
    assert isinstance(doc.get("instance_id"), str) and doc["instance_id"], doc
    assert isinstance(doc.get("length"), int) and isinstance(doc.get("lac_length"), int), doc
    return {key: doc[key] for key in STATE_KEYS}


class Bookie:
    """A bookie process seen through HTTP."""

    def __init__(self, proc: ServiceProcess, secret: str | None = None) -> None:
        self.proc = proc
        headers = {"X-Cluster-Secret": secret} if secret else {}
        self.http = httpx.Client(
            base_url=proc.url, headers=headers, timeout=30.0, verify=default_verify()
        )

    @property
    def id(self) -> str:
        return self.proc.address

    def close(self) -> None:
        self.http.close()

    def add(self, records: list[FramedRecord]) -> dict:
        r = self.http.post(
            "/v1/entries",
            content=framing.encode(records),
            headers={"Content-Type": framing.MEDIA_TYPE},
        )
        assert r.status_code == 200, r.text
        return r.json()

    def read(self, lid: int, eid: int) -> FramedRecord:
        r = self.http.get(f"/v1/ledgers/{lid}/entries/{eid}")
        assert r.status_code == 200, r.text
        (record,) = framing.decode(r.content)
        return record

    def read_range(
        self, lid: int, first: int, last: int, **params: int | str
    ) -> list[FramedRecord]:
        r = self.http.get(
            f"/v1/ledgers/{lid}/entries", params={"from": first, "to": last, **params}
        )
        assert r.status_code == 200, r.text
        return framing.decode(r.content)

    def lac(self, lid: int) -> dict:
        """The ledger's state here: ledger_id, lac, last_entry_id, fenced (``state``)."""
        r = self.http.get(f"/v1/ledgers/{lid}/lac")
        assert r.status_code == 200, r.text
        return state(r.json())

    def fence(self, lid: int) -> dict:
        r = self.http.post(f"/v1/ledgers/{lid}/fence")
        assert r.status_code == 200, r.text
        return state(r.json())

    def info(self) -> dict:
        r = self.http.get("/v1/info")
        assert r.status_code == 200, r.text
        return r.json()

    def ledgers(self) -> list[int]:
        r = self.http.get("/v1/ledgers")
        assert r.status_code == 200, r.text
        return r.json()["ledgers"]

    def metric(self, name: str, labels: str = "") -> float:
        """One sample of /metrics (``labels`` like ``reason="ledger_fenced"``), over the
        bookie's kept-alive client: a client made per call builds a TLS context each time
        (about 30 ms of CPU), which made most of a fuzz test's time."""
        text = self.http.get("/metrics", timeout=10.0).text
        wanted = f"{name}{{{labels}}}" if labels else name
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            key, _, value = line.rpartition(" ")
            if key == wanted:
                return float(value)
        return 0.0

    def healthy(self) -> bool:
        try:
            return poll_client().get(f"{self.proc.url}/health", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False


def exit_code_and_log(proc: ServiceProcess, deadline_s: float = 30.0) -> tuple[int, str]:
    """Wait for a process that must refuse to start; its exit code and log."""
    assert proc.proc is not None
    code = proc.proc.wait(deadline_s)
    return code, tail(proc.log_path, 200)


def store_bytes(data_dir: Path) -> int:
    return sum(
        (data_dir / name).stat().st_size
        for name in ("bookie.db", "bookie.db-wal")
        if (data_dir / name).exists()
    )


class RawConnection:
    """One keep-alive HTTP/1.1 connection on asyncio streams: cheap enough that 64 of them
    in one test process really keep 64 requests in flight."""

    def __init__(self, host: str, port: int, secret: str | None = None) -> None:
        self.host, self.port = host, port
        self.extra = f"X-Cluster-Secret: {secret}\r\n" if secret else ""
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> RawConnection:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    def send(self, method: str, path: str, body: bytes = b"", content_type: str = "") -> None:
        assert self.writer is not None
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{self.extra}"
        if content_type:
            head += f"Content-Type: {content_type}\r\n"
        head += f"Content-Length: {len(body)}\r\n\r\n"
        self.writer.write(head.encode() + body)

    async def receive(self) -> tuple[int, bytes]:
        assert self.reader is not None
        raw = await self.reader.readuntil(b"\r\n\r\n")
        status = int(raw[9:12])
        length = 0
        for line in raw.split(b"\r\n")[1:]:
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await self.reader.readexactly(length) if length else b""
        return status, body

    async def post_entries(self, records: list[FramedRecord]) -> dict:
        self.send("POST", "/v1/entries", framing.encode(records), framing.MEDIA_TYPE)
        status, body = await self.receive()
        assert status == 200, body
        return json.loads(body)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except OSError:
                pass
