"""The load generator of ``quire bench --log``: ``GatewayLoad`` (services/bench/load.py)
appending to one log instead of adding to ledgers.

Every client sends ``POST /v1/logs/{log}/records``: one raw record (``batch`` 1) or
a JSON batch, on its own keep-alive connection, one request in flight. With
``idempotency_keys`` each request carries an ``Idempotency-Key`` no other request of
the run uses (the run's prefix, this process's pid and a counter), so the gateway
checks and remembers every one: the cost of dedup, not a dedup hit.
"""

from __future__ import annotations

import os
from typing import Any

from services.bench.load import GatewayLoad


class LogLoad(GatewayLoad):
    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(spec)
        self.log: str = spec["log"]
        self.keys: bool = bool(spec.get("idempotency_keys"))
        self.key_prefix = f"{spec.get('key_prefix', 'bench')}-{os.getpid()}-"
        self.sent_keys = 0
        token = spec.get("token")
        content_type = "application/octet-stream" if self.batch == 1 else "application/json"
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self.head_start = (
            f"POST /v1/logs/{self.log}/records HTTP/1.1\r\n"
            f"Host: {self.host}:{self.port}\r\nContent-Type: {content_type}\r\n{auth}"
            f"Content-Length: {len(self.body)}\r\n"
        ).encode()
        self.plain_head = self.head_start + b"\r\n"

    def head(self, ledgers: list[int], sent: int) -> bytes:
        if not self.keys:
            return self.plain_head
        self.sent_keys += 1
        key = f"Idempotency-Key: {self.key_prefix}{self.sent_keys}\r\n\r\n"
        return self.head_start + key.encode()
