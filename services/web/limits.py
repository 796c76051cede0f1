"""The bounds of the HTTP servers every service runs (docs/style.md §5), each named with
its unit last: module constants, and ``ServerLimits``, the bounds of one server (its
time-outs and connections, filled from settings), with ``ConnectionTable``, its open
connections in all and per client address, which services/web/server.py's protocol
enforces per connection and request.

Bounds of the API every service shares are in ``services/limits.py``; what an operator
tunes (time-outs, connections) is a setting (``services/settings.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from services.limits import REQUESTS_IN_FLIGHT_MAX
from services.settings import CommonSettings

# A request head (services/web/server.py): its bytes and its header lines.
HEAD_SIZE_MAX_BYTES = 64 * 1024
HEADERS_MAX = 100
# A Content-Length with more significant digits than any limit we set has is over the
# limit whatever it says, and never reaches int(), which refuses past 4,300 digits
# (services/web/body.py).
CONTENT_LENGTH_DIGITS_MAX = 20
# How long a connection we answered ourselves may linger to drain the client's bytes
# (services/web/server.py).
LINGER_S = 1.0
# A head timer runs for a random share of the time-out, at least this one. Sockets an
# attacker opens together would otherwise all time out (and be opened again) together,
# every time: those bursts of closes and accepts stalled the event loop; spread out, the
# same work barely shows (services/web/server.py;
# benchmarks/README.md, "Measured choices").
HEAD_TIMEOUT_SHARE_MIN = 0.5
# Answer bodies up to this size are joined to the head (a copy); larger ones are written
# after it (services/web/coalesce.py).
COALESCE_JOIN_MAX_BYTES = 64 * 1024
# How long a WebSocket connection is given to finish after the server's shutdown began: a
# stream's adds in flight normally take milliseconds (services/web/websocket.py).
DRAIN_WAIT_S = 5.0

# The access log (services/web/access.py): a request slower than this is logged as slow;
# a path is logged up to this many characters (a request head may hold 64 KiB).
SLOW_REQUEST_MS = 1_000
PATH_LOGGED_MAX_CHARS = 512

# The HTTP server itself (services/web/serve.py): its listen backlog; uvicorn's default
# WebSocket message bound, for services that speak no WebSocket (unused there); the file
# descriptors kept for everything but client connections (bookie and ZooKeeper
# connections, the store, logs); the watchers of each listening socket
# (``FrozenHeapServer``), so up to this many connections are accepted per turn of the
# event loop.
HTTP_BACKLOG = 2048
WS_MAX_SIZE_UNUSED = 16 * 1024 * 1024
FD_RESERVE = 1024
ACCEPT_WATCHERS = 8


@dataclass(frozen=True)
class ServerLimits:
    """The bounds of one server, in seconds, connections and bytes."""

    header_read_timeout_s: float = 10.0
    body_read_timeout_s: float = 60.0
    idle_timeout_s: float = 30.0
    connections_max: int = 10_000
    connections_per_client_max: int = 512
    requests_in_flight_max: int = REQUESTS_IN_FLIGHT_MAX
    head_size_max_bytes: int = HEAD_SIZE_MAX_BYTES
    headers_max: int = HEADERS_MAX

    @classmethod
    def from_settings(cls, settings: CommonSettings) -> ServerLimits:
        return cls(
            header_read_timeout_s=settings.header_read_timeout_ms / 1000,
            body_read_timeout_s=settings.body_read_timeout_ms / 1000,
            idle_timeout_s=settings.idle_timeout_ms / 1000,
            connections_max=settings.connections_max,
            connections_per_client_max=settings.connections_per_client_max,
            requests_in_flight_max=settings.requests_in_flight_max,
        )


class ConnectionTable:
    """Open connections of one server, in all and per client address."""

    def __init__(self, limits: ServerLimits) -> None:
        self.limits = limits
        self.total = 0
        self.by_client: dict[str, int] = {}

    def admit(self, client: str) -> str | None:
        """Count a new connection from ``client``; the reason to refuse it, or None."""
        if self.total >= self.limits.connections_max:
            return f"too many connections (at most {self.limits.connections_max})"
        count = self.by_client.get(client, 0)
        if count >= self.limits.connections_per_client_max:
            return (
                f"too many connections from {client} "
                f"(at most {self.limits.connections_per_client_max} per client address)"
            )
        self.by_client[client] = count + 1
        self.total += 1
        return None

    def release(self, client: str) -> None:
        count = self.by_client.get(client, 0)
        if count <= 1:
            self.by_client.pop(client, None)
        else:
            self.by_client[client] = count - 1
        self.total -= 1
