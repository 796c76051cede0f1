"""The gateway calls the streaming source makes, over the connector's client
(``client.SparkGatewayClient``; every failure a ``QuireSparkError`` saying what the gateway
answered).

On the driver: the log's list of ledgers, a ledger's state and last entry, the LAC of
an open ledger, a short binary range read to find where the last whole batch ends.
On executors: the binary range read of a partition, checked to come whole. A
``StreamClient`` pickles as its settings (the connection pool is made on first use).
"""

from __future__ import annotations

from collections.abc import Iterator

from services.spark.client import SHORT_READ, QuireSparkError, SparkGatewayClient, TlsOptions


class StreamClient:
    """One gateway (``url``) with the API token and the ledger password when given,
    verified over https as ``tls`` says."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        password: str | None = None,
        tls: TlsOptions = TlsOptions(),
    ) -> None:
        self.gateway = SparkGatewayClient(url, token, tls=tls)
        self.password = password

    def close(self) -> None:
        self.gateway.close()

    def log(self, name: str) -> list[int]:
        """The log's ledgers, in order."""
        return [int(lid) for lid in self.gateway.get_log(name)["ledgers"]]

    def ledger(self, ledger_id: int) -> tuple[bool, int]:
        """(closed, last entry id) of a ledger; the last entry is -1 when it is open
        or empty."""
        doc = self.gateway.ledger(ledger_id)
        last = doc.get("last_entry_id")
        closed = doc["state"] == "CLOSED"
        return closed, int(last) if closed and last is not None else -1

    def lac(self, ledger_id: int) -> int:
        return self.gateway.lac(ledger_id, self.password)

    def read_range(self, ledger_id: int, first: int, last: int) -> Iterator[tuple[int, bytes]]:
        """Entries ``first..last`` of a ledger in order, streamed in the binary format.
        Raises when the stream does not bring exactly that range (the caller planned
        a range the gateway can serve whole)."""
        expected = first
        for frames in self.gateway.read_range(ledger_id, first, last, self.password):
            for entry_id, payload in frames:
                if entry_id != expected:
                    raise QuireSparkError(
                        SHORT_READ, f"ledger {ledger_id}: entry {entry_id} came, not {expected}"
                    )
                expected += 1
                yield entry_id, payload
        if expected != last + 1:
            raise QuireSparkError(
                SHORT_READ,
                f"ledger {ledger_id}: the read of {first}..{last} ended after entry {expected - 1}",
            )
