"""One long-lived ``BookieClient`` per bookie id."""

from __future__ import annotations

import asyncio
import ssl
from functools import partial

from services.bookie_client.client import BookieClient
from services.bookie_client.limits import (
    CONNECT_TIMEOUT_S,
    CONNECTIONS_MAX,
    LONG_POLLS_MAX,
    REQUEST_TIMEOUT_S,
)
from services.bookie_client.transport import split_address
from services.errors import BookieUnavailable


class BookieClientPool:
    """One long-lived ``BookieClient`` per bookie id, created on first use and closed
    in ``aclose()``. A bookie's id is its advertised ``host:port`` (docs/api.md "Bookie").

    With an ``ssl_context`` every bookie is reached over TLS and must present a
    certificate for the host of its id, wherever it is reached (docs/security.md, "TLS")."""

    def __init__(
        self,
        cluster_secret: str | None = None,
        *,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        connections_max: int = CONNECTIONS_MAX,
        long_polls_max: int = LONG_POLLS_MAX,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._tls = ssl_context is not None
        self._new_client = partial(
            BookieClient,
            cluster_secret=cluster_secret,
            connect_timeout_s=connect_timeout_s,
            request_timeout_s=request_timeout_s,
            connections_max=connections_max,
            long_polls_max=long_polls_max,
            ssl_context=ssl_context,
        )
        self._clients: dict[str, BookieClient] = {}
        self._closed = False

    def get(self, bookie_id: str, address: str | None = None) -> BookieClient:
        """The client of ``bookie_id`` (reached at ``address``, by default the id)."""
        client = self._clients.get(bookie_id)
        if client is None:
            if self._closed:
                raise BookieUnavailable(f"bookie {bookie_id}: the client pool is closed")
            # Over TLS the bookie must be who its id says (docs/security.md, "TLS").
            hostname = split_address(bookie_id)[0] if self._tls else None
            client = self._new_client(address or bookie_id, server_hostname=hostname)
            self._clients[bookie_id] = client
        return client

    __getitem__ = get

    def __contains__(self, bookie_id: str) -> bool:
        return bookie_id in self._clients

    async def discard(self, bookie_id: str) -> None:
        """Close and forget one bookie's client (e.g. its address changed)."""
        client = self._clients.pop(bookie_id, None)
        if client is not None:
            await client.aclose()

    async def aclose(self) -> None:
        self._closed = True
        clients, self._clients = list(self._clients.values()), {}
        await asyncio.gather(*(c.aclose() for c in clients), return_exceptions=True)
