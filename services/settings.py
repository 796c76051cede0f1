"""Typed settings of every service: flags and ``QUIRE_*`` environment variables.

A flag wins over its variable (pydantic-settings puts the CLI source first).
Impossible values are refused at start-up with a one-line message.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from pathlib import Path
from typing import TypeVar

from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from services.ledger_client.settings import LedgerClientSettings
from services.limits import (
    BATCH_ENTRIES_MAX,
    BODY_SIZE_MAX_BYTES,
    IDEMPOTENCY_WINDOW_MAX_S,
    REQUESTS_IN_FLIGHT_MAX,
)
from services.tls.contexts import TlsFiles
from services.zk.auth import AUTH_ENV, ZkCredentials, load_credentials

_HOSTPORT = re.compile(r"^[A-Za-z0-9.\-\[\]:]+:\d{1,5}$")
_RACK = re.compile(r"^[A-Za-z0-9._/\-]{1,64}$")


class CommonSettings(BaseSettings):
    """Options every service takes (docs/api.md, "Processes and how they start")."""

    model_config = SettingsConfigDict(
        env_prefix="QUIRE_",
        cli_kebab_case=True,
        cli_implicit_flags=True,
        extra="ignore",
    )

    zk: str = Field("127.0.0.1:2181", description="ZooKeeper connection string HOST:PORT[,...]")
    zk_root: str = Field("/quire", description="ZooKeeper chroot, created if missing")
    host: str = Field("127.0.0.1", description="address to listen on and advertise")
    port: int = Field(0, ge=0, le=65535, description="port to listen on")
    zk_session_timeout: float = Field(
        10.0, ge=1.0, le=600.0, description="ZooKeeper session timeout in seconds"
    )
    # ZooKeeper digest authentication (docs/security.md, "ZooKeeper authentication"). The
    # credentials come from this file or from the variable QUIRE_ZK_AUTH, which is not a
    # field on purpose: every field is a flag too, and a command line is public on a host.
    zk_auth_file: Path | None = Field(
        None,
        description="file of one line USER:PASSWORD (or the variable QUIRE_ZK_AUTH, never a "
        "flag): authenticate with ZooKeeper's digest scheme, and give every znode created an "
        "ACL of all rights to that principal and none to anyone else",
    )
    _zk_credentials: ZkCredentials | None = PrivateAttr(None)
    cluster_secret: str | None = Field(
        None, description="secret shared by the services; bookies refuse data calls without it"
    )
    log_level: str = Field(
        "info", description="debug, info, warning or error (debug: an access line per request)"
    )
    slow_request_ms: int = Field(
        1_000,
        ge=0,
        le=3_600_000,
        description="a request slower than this is logged as a warning with its request id "
        "(0: never); a wait the request asks for (wait_ms) is not counted",
    )
    # Bounds of the HTTP server (services/web/server.py), docs/style.md §5.
    header_read_timeout_ms: int = Field(
        10_000, ge=100, le=600_000, description="longest wait for a request's line and headers"
    )
    body_read_timeout_ms: int = Field(
        60_000, ge=100, le=3_600_000, description="longest wait for a whole request body"
    )
    idle_timeout_ms: int = Field(
        30_000, ge=100, le=3_600_000, description="idle keep-alive connection closed after this"
    )
    connections_max: int = Field(
        10_000, ge=1, le=1_000_000, description="open connections in all; more get 503"
    )
    connections_per_client_max: int = Field(
        512, ge=1, le=1_000_000, description="open connections per client address; more get 503"
    )
    requests_in_flight_max: int = Field(
        REQUESTS_IN_FLIGHT_MAX,
        ge=1,
        le=1_000_000,
        description="requests being served at once; more get 503 (a long poll counts "
        "while it waits)",
    )
    gc_thorough_interval_s: int = Field(
        300,
        ge=0,
        le=86_400,
        description="the survivors of each full garbage collection stay frozen, and one "
        "full collection every this many seconds walks every object (0: CPython's "
        "collector as it is)",
    )

    # TLS (docs/security.md, "TLS"): on when the three files are given, for the port
    # and for every call to another service; one cluster is all TLS or all plain.
    tls_cert: Path | None = Field(
        None,
        description="PEM certificate chain to serve HTTPS with (TLS is on when --tls-cert, "
        "--tls-key and --tls-ca are all given)",
    )
    tls_key: Path | None = Field(
        None,
        description="PEM private key of --tls-cert, unencrypted (readable by the service only)",
    )
    tls_ca: Path | None = Field(
        None,
        description="PEM CA bundle that peers' certificates are verified against; with TLS "
        "on, calls to other services are HTTPS and a bookie must be named by its id's host",
    )
    tls_client_auth: bool = Field(
        False,
        description="mutual TLS: refuse a client without a certificate signed by --tls-ca "
        "(the services present their own)",
    )

    @model_validator(mode="after")
    def _tls(self) -> CommonSettings:
        given = [self.tls_cert, self.tls_key, self.tls_ca]
        if any(given) and not all(given):
            raise ValueError("--tls-cert, --tls-key and --tls-ca go together: give all three")
        if self.tls_client_auth and not all(given):
            raise ValueError("--tls-client-auth needs --tls-cert, --tls-key and --tls-ca")
        return self

    @model_validator(mode="after")
    def _zk_auth(self) -> CommonSettings:
        self._zk_credentials = load_credentials(self.zk_auth_file, os.environ.get(AUTH_ENV))
        return self

    @property
    def zk_credentials(self) -> ZkCredentials | None:
        """The ZooKeeper digest credentials, or None: no authentication, open ACLs."""
        return self._zk_credentials

    @property
    def tls_files(self) -> TlsFiles | None:
        """Where the TLS material is, or None when TLS is off."""
        if self.tls_cert is None or self.tls_key is None or self.tls_ca is None:
            return None
        return TlsFiles(self.tls_cert, self.tls_key, self.tls_ca, self.tls_client_auth)

    @field_validator("zk")
    @classmethod
    def _zk(cls, value: str) -> str:
        parts = [p.strip() for p in value.split(",")]
        if not parts or not all(_HOSTPORT.match(p) for p in parts):
            raise ValueError(f"--zk must be HOST:PORT[,HOST:PORT...], got {value!r}")
        for part in parts:
            port = int(part.rsplit(":", 1)[1])
            if not 1 <= port <= 65535:
                raise ValueError(f"--zk port out of range in {part!r}")
        return ",".join(parts)

    @field_validator("zk_root")
    @classmethod
    def _zk_root(cls, value: str) -> str:
        if not value.startswith("/") or value.endswith("/") and value != "/" or "//" in value:
            raise ValueError(f"--zk-root must be an absolute ZooKeeper path, got {value!r}")
        return value

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        if value.lower() not in {"debug", "info", "warning", "error"}:
            raise ValueError("--log-level must be debug, info, warning or error")
        return value.lower()

    @property
    def address(self) -> str:
        """The advertised ``host:port``: the service's identity."""
        return f"{self.host}:{self.port}"

    @property
    def zk_hosts(self) -> str:
        """Connection string with the chroot appended, as kazoo takes it."""
        return self.zk if self.zk_root == "/" else f"{self.zk}{self.zk_root}"


class BookieSettings(CommonSettings):
    port: int = Field(3181, ge=1, le=65535, description="port to listen on")
    data_dir: Path = Field(Path("./bookie-data"), description="where entries are stored")
    journal_sync: bool = Field(True, description="fsync before acknowledging an add")
    readonly_free_ratio: float = Field(
        0.05, ge=0.0, le=1.0, description="go read-only when free disk falls under this ratio"
    )
    disk_check_interval: float = Field(
        1.0, gt=0.0, le=3600.0, description="seconds between free-disk checks"
    )
    body_read_timeout_ms: int = Field(
        30_000, ge=1, le=600_000, description="longest wait for one add request's body bytes"
    )
    gc_interval_s: float = Field(
        600.0,
        ge=0.0,
        le=86_400.0,
        description="seconds between garbage-collection passes, which delete the local data "
        "of ledgers whose metadata is gone (0: never; POST /v1/gc still runs one)",
    )
    gc_grace_s: float = Field(
        60.0,
        ge=0.0,
        le=86_400.0,
        description="a ledger's metadata must be found missing by two reads this many "
        "seconds apart before garbage collection deletes its local data",
    )
    gc_deletes_per_pass: int = Field(
        100, ge=1, le=100_000, description="ledgers one garbage-collection pass deletes at most"
    )
    rack: str | None = Field(
        None,
        description="the rack (failure domain) this bookie is on, registered with it; new "
        "ensembles put each write quorum on distinct racks (none: the default rack)",
    )

    @field_validator("rack")
    @classmethod
    def _rack(cls, value: str | None) -> str | None:
        if value is not None and not _RACK.match(value):
            raise ValueError(
                f"--rack must be 1 to 64 letters, digits and . _ - / characters, got {value!r}"
            )
        return value


class GatewaySettings(CommonSettings):
    port: int = Field(8080, ge=1, le=65535, description="port to listen on")
    api_token: str | None = Field(None, description="token every /v1/ call needs")
    admin_token: str | None = Field(None, description="token /v1/admin/ calls need")
    token_file: Path | None = Field(
        None,
        description="TOML file of scoped tokens (read, write or admin over ledger ids and "
        "log-name prefixes; their SHA-256 only), beside the two tokens above; reloaded when "
        "it changes and on SIGHUP",
    )
    # Tunables of the write and read paths (docs/style.md §5): each a flag and a QUIRE_*
    # variable, with its unit last. Those of the ledger client have its names and its
    # defaults (services/ledger_client/settings.py; tests/unit/test_settings.py checks).
    fast_path: bool = Field(
        True,
        description="serve adds, log appends and tailing log reads below FastAPI's routing "
        "(same contract)",
    )
    admission_wait_ms: int = Field(
        30_000, ge=1, le=600_000, description="longest wait of an add for room in its ledger"
    )
    add_timeout_ms: int = Field(
        20_000,
        ge=100,
        le=600_000,
        description="longest wait of an add for its ack quorum; then it fails with 504 "
        "quorum_timeout (outcome unknown) and the ledger is closed at its last acknowledged "
        "entry",
    )
    explicit_lac_delay_ms: int = Field(
        200, ge=1, le=60_000, description="idle time before a ledger's LAC is sent explicitly"
    )
    speculative_read_ms: int = Field(
        2_000, ge=1, le=60_000, description="a replica slower than this: ask another too"
    )
    lac_repoll_delay_ms: int = Field(
        20, ge=1, le=10_000, description="pause before re-polling a bookie that answered early"
    )
    recovery_timeout_ms: int = Field(
        120_000, ge=1_000, le=3_600_000, description="longest run of one ledger recovery"
    )
    closed_handles_kept_max: int = Field(
        100_000, ge=0, le=10_000_000, description="closed write handles remembered"
    )
    bookie_requests_in_flight_max: int = Field(
        4, ge=1, le=256, description="add requests in flight to one bookie"
    )
    bookie_requests_in_flight_eager: int = Field(
        1,
        ge=1,
        le=256,
        description="add requests in flight to one bookie that leave at once; the others "
        "(up to bookie_requests_in_flight_max) only with a deep queue "
        "(bookie_pipeline_entries_min entries or bookie_pipeline_bytes_min bytes)",
    )
    bookie_pipeline_entries_min: int = Field(
        64, ge=1, le=BATCH_ENTRIES_MAX, description="queued entries that open a deeper pipeline"
    )
    bookie_pipeline_bytes_min: int = Field(
        512 * 1024,
        ge=1,
        le=BODY_SIZE_MAX_BYTES,
        description="queued payload bytes that open a deeper pipeline",
    )
    bookie_batch_entries_max: int = Field(
        2_000, ge=1, le=BATCH_ENTRIES_MAX, description="entries in one add request to a bookie"
    )
    bookie_batch_bytes_max: int = Field(
        16 * 1024 * 1024,
        ge=1,
        le=BODY_SIZE_MAX_BYTES // 2,
        description="payload bytes in one add request to a bookie",
    )
    bookie_connect_timeout_ms: int = Field(
        2_000, ge=1, le=60_000, description="TCP connect time-out to a bookie"
    )
    bookie_request_timeout_ms: int = Field(
        10_000, ge=1, le=600_000, description="time-out of one request to a bookie"
    )
    bookie_add_timeout_ms: int = Field(
        800,
        ge=1,
        le=600_000,
        description="time-out of one add request to a bookie; a bookie that answers nothing "
        "in time, not even whether it is alive (asked at half of it), is replaced like a "
        "failed one; a busy bookie is waited for, up to 8 time-outs",
    )
    # Logs (gateway/logs/): automatic rolls, the idempotency window, settling an append
    # whose ledger was fenced or closed under it.
    log_roll_bytes: int = Field(
        256 * 1024 * 1024, ge=1, description="roll a log's ledger once it holds this many bytes"
    )
    log_roll_entries: int = Field(
        1_000_000, ge=1, description="roll a log's ledger once it holds this many entries"
    )
    log_roll_age_s: float = Field(
        3600.0, gt=0.0, description="roll a log's ledger once it is this old (seconds)"
    )
    idempotency_window_s: float = Field(
        120.0,
        ge=0.0,
        le=IDEMPOTENCY_WINDOW_MAX_S,
        description="how long an Idempotency-Key is remembered",
    )
    idempotency_keys_max: int = Field(
        100_000, ge=0, le=10_000_000, description="Idempotency-Keys remembered per log"
    )
    log_settle_timeout_ms: int = Field(
        10_000,
        ge=1,
        le=600_000,
        description="longest wait, after a log append's ledger was fenced, for the ledger "
        "to close and tell whether the append is in it",
    )
    log_forwarding: bool = Field(
        True,
        description="take appends for every log: forward one to the gateway writing the log, "
        "or take the role when the log has no live writer (off: 409 not_writer, as before)",
    )
    cursor_flush_ms: int = Field(
        100,
        ge=0,
        le=60_000,
        description="acks to one durable cursor on this gateway are merged (the highest "
        "wins) and written to ZooKeeper at most this often; an ack is answered once written",
    )

    # REST bodies (services/budget.py): the bytes all request bodies may hold.
    requests_bytes_in_flight_max: int = Field(
        256 * 1024 * 1024,
        ge=1,
        le=1 << 40,
        description="bytes of request bodies all REST calls together may hold, from "
        "their first byte to their answer; past it a request waits (in turn; the oldest "
        "never does) and the gateway stops reading its socket",
    )

    # Streaming appends (gateway/streams/session.py): credits and bytes in flight per stream.
    stream_credits: int = Field(
        1_024, ge=1, le=BATCH_ENTRIES_MAX, description="records one stream may have in flight"
    )
    stream_bytes_in_flight_max: int = Field(
        64 * 1024 * 1024,
        ge=1,
        le=BODY_SIZE_MAX_BYTES,
        description="payload bytes one stream may have in flight; past it the gateway "
        "stops reading the stream until acknowledgements free room",
    )
    streams_bytes_in_flight_max: int = Field(
        256 * 1024 * 1024,
        ge=1,
        le=1 << 40,
        description="payload bytes all streams together may have in flight; past it a "
        "stream waits (in turn; the oldest never does) before it reads its next record",
    )

    def ledger_client(self) -> LedgerClientSettings:
        """The bounds of the ledger client this gateway runs: its flags of the same names."""
        names = (f.name for f in dataclasses.fields(LedgerClientSettings))
        return LedgerClientSettings(**{name: getattr(self, name) for name in names})


class AuditorSettings(CommonSettings):
    port: int = Field(8091, ge=1, le=65535, description="port to listen on")
    lost_bookie_delay: float = Field(
        30.0, ge=0.0, description="seconds a bookie must be gone before its ledgers are marked"
    )
    audit_interval: float = Field(600.0, gt=0.0, description="seconds between full checks")
    audit_verify: str = Field(
        "sample", description="replica check of the full audit: none, sample or all entries"
    )

    @field_validator("audit_verify")
    @classmethod
    def _audit_verify(cls, value: str) -> str:
        if value not in ("none", "sample", "all"):
            raise ValueError("must be none, sample or all")
        return value

    audit_concurrency: int = Field(
        32, ge=1, le=1024, description="ZooKeeper reads and bookie checks in flight during an audit"
    )
    bookie_request_timeout_ms: int = Field(
        5_000, ge=10, le=600_000, description="a bookie call slower than this fails (hung bookie)"
    )
    retention_interval: float = Field(
        60.0,
        gt=0.0,
        description="seconds between retention passes of the elected auditor (logs' policies)",
    )
    retention_deletes_per_s: float = Field(
        50.0, gt=0.0, description="ledgers a retention pass deletes per second at most"
    )


class ReplicatorSettings(CommonSettings):
    port: int = Field(8092, ge=1, le=65535, description="port to listen on")
    open_ledger_grace: float = Field(
        30.0, ge=0.0, description="seconds before an open ledger's last fragment is recovered"
    )
    rereplication_bytes_per_s_max: int = Field(
        0, ge=0, description="bytes per second copied at most (0: unlimited)"
    )
    ledgers_in_flight_max: int = Field(
        16, ge=1, le=1024, description="ledgers one worker repairs at once"
    )
    copy_batch_entries_max: int = Field(
        500, ge=1, le=10_000, description="entries per copy request to a target bookie"
    )
    copy_batch_bytes_max: int = Field(
        4 * 1024 * 1024, ge=1024, le=64 * 1024 * 1024, description="bytes per copy request"
    )
    bookie_request_timeout_ms: int = Field(
        5_000, ge=10, le=600_000, description="a bookie call slower than this fails (hung bookie)"
    )
    marks_poll_interval: float = Field(
        5.0, gt=0.0, description="seconds between walks of the marks (besides the watch)"
    )


S = TypeVar("S", bound=CommonSettings)


def load_settings(cls: type[S], argv: list[str] | None = None, prog: str | None = None) -> S:
    """Parse flags and environment; on an impossible value print one line and exit 2."""
    args = sys.argv[1:] if argv is None else argv
    try:
        return cls(_cli_parse_args=args, _cli_prog_name=prog)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = first.get("loc", ())
        # A check of several flags together (a model validator) names them itself.
        where = "--" + "-".join(str(p) for p in loc).replace("_", "-") + ": " if loc else ""
        msg = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
        print(f"{prog or 'quire'}: error: {where}{msg}", file=sys.stderr)
        raise SystemExit(2) from None
    except SettingsError as exc:
        print(f"{prog or 'quire'}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
