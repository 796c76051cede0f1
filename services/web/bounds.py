"""The bounds of one HTTP server (``ServerLimits``) and its open connections, in all and
per client address (``ConnectionTable``): what services/web/server.py's protocol
enforces per connection and request."""

from __future__ import annotations

from dataclasses import dataclass

from services.settings import CommonSettings

# Bounds of a request head (docs/style.md §5).
HEAD_SIZE_MAX_BYTES = 64 * 1024
HEADERS_MAX = 100
# Requests being served at once by one process; more get a JSON 503.
REQUESTS_IN_FLIGHT_MAX = 4096


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
