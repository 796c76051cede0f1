"""The server and client ``ssl.SSLContext`` of a service, and their reload.

A service with TLS on (``--tls-cert``, ``--tls-key`` and ``--tls-ca`` all given;
docs/security.md, "TLS") holds two contexts for its whole life:

- the server context serves its port: its own certificate chain and key; with
  ``--tls-client-auth`` it also asks every client for a certificate and refuses the
  handshake of one without a certificate signed by the CA bundle (mutual TLS);
- the client context is what its own calls to other services use (the bookie client):
  it verifies the peer's chain against the CA bundle and the peer's name against the
  host it was asked to reach, and carries the service's own certificate chain, which a
  peer asks for only when it requires client certificates.

Both require TLS 1.2 or later. ``TlsContexts.reload`` re-reads the files into the same
two contexts (SIGHUP, services/web/serve.py): handshakes from then on use the new
certificate and key, connections already made keep theirs. The files are first loaded
into throwaway contexts, so a half-written or mismatched pair is refused whole and the
running contexts are left as they were. A CA bundle re-read is added to what the
contexts trust: OpenSSL cannot remove a CA from a live context, and a rotation needs
the old and new CA trusted side by side anyway; a CA taken out of the bundle stops being
trusted when the service restarts.

The server context sends no TLS 1.3 session tickets (``server_context``): every
connection makes a full handshake, which keep-alive connections pay once.

What this module will not do: choose ciphers (OpenSSL's defaults for TLS 1.2 and 1.3),
check revocation, or read encrypted keys.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass
from functools import partial
from pathlib import Path

log = logging.getLogger(__name__)


class TlsError(Exception):
    """A certificate, key or CA bundle that cannot be used: the message names the file
    and says why, without any of its content."""


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """Where a service's TLS material lives (its ``--tls-*`` flags)."""

    cert: Path  # the certificate chain, PEM, leaf first
    key: Path  # the private key, PEM, unencrypted
    ca: Path  # the CA bundle peers are verified against, PEM
    client_auth: bool = False  # require client certificates signed by ``ca``


def _check_readable(path: Path) -> None:
    """Name the file that is missing or unreadable: OpenSSL's own error does not."""
    try:
        with path.open("rb"):
            pass
    except FileNotFoundError:
        raise TlsError(f"{path}: no such file") from None
    except OSError as exc:
        raise TlsError(f"{path}: {exc.strerror or 'cannot be read'}") from None


def _encrypted(key: Path) -> bytes:
    """OpenSSL asks for a password: without this it would prompt on the terminal."""
    raise TlsError(f"{key}: the key is encrypted; give it unencrypted")


def _load_chain(context: ssl.SSLContext, files: TlsFiles) -> None:
    add_certificate(context, files.cert, files.key)


def add_certificate(context: ssl.SSLContext, cert: Path, key: Path) -> None:
    """Present ``cert`` (a PEM chain) with its unencrypted ``key`` from ``context``;
    ``TlsError`` naming the files when they cannot be used (never their content)."""
    _check_readable(cert)
    _check_readable(key)
    try:
        context.load_cert_chain(cert, key, password=partial(_encrypted, key))
    except (OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, ssl.SSLError) else None
        raise TlsError(
            f"{cert} and {key}: not a PEM certificate chain and its matching "
            f"key ({reason or type(exc).__name__})"
        ) from None


def _load_ca(context: ssl.SSLContext, files: TlsFiles) -> None:
    _load_bundle(context, files.ca)


def _load_bundle(context: ssl.SSLContext, ca: Path) -> None:
    _check_readable(ca)
    try:
        context.load_verify_locations(cafile=ca)
    except (OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, ssl.SSLError) else None
        raise TlsError(f"{ca}: not a PEM CA bundle ({reason or type(exc).__name__})") from None


def server_context(files: TlsFiles) -> ssl.SSLContext:
    """The context a service serves its port with (module docstring)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(context, files)
    _load_ca(context, files)
    context.verify_mode = ssl.CERT_REQUIRED if files.client_auth else ssl.CERT_NONE
    # No TLS 1.3 session tickets: sent after the handshake, a ticket reaches a client
    # while it writes its first request, and a Python client that reads in another
    # thread meanwhile (websockets' sync client) lost that request far more often with
    # one (docs/security.md, "TLS"). Nothing here resumes sessions.
    context.num_tickets = 0
    return context


def client_context(files: TlsFiles) -> ssl.SSLContext:
    """The context a service reaches its peers with (module docstring): the peer's
    certificate verified against the CA bundle and its name checked."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, check_hostname
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_ca(context, files)
    _load_chain(context, files)
    return context


def verifying_context(ca: Path) -> ssl.SSLContext:
    """What a client of the services (the CLI, ``quire bench``) reaches them with when
    given a CA bundle: servers verified against ``ca`` alone, their names checked, TLS
    1.2 or later. ``TlsError`` names the file when it cannot be used."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, check_hostname
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_bundle(context, ca)
    return context


class TlsContexts:
    """The two live contexts of a service and the files they are read from."""

    def __init__(self, files: TlsFiles) -> None:
        self.files = files
        self.server = server_context(files)
        self.client = client_context(files)

    def reload(self) -> None:
        """Re-read the files into the live contexts (module docstring). Raises
        ``TlsError``, leaving both contexts as they were, when a file cannot be used."""
        server_context(self.files)
        client_context(self.files)
        for context in (self.server, self.client):
            _load_chain(context, self.files)
            _load_ca(context, self.files)

    def reload_logged(self) -> None:
        """``reload`` as a signal handler runs it: the outcome in one log line."""
        try:
            self.reload()
        except TlsError as exc:
            log.error("TLS files not reloaded, the old certificate stays in use: %s", exc)
            return
        log.info("TLS certificate, key and CA bundle reloaded from %s", self.files.cert)
