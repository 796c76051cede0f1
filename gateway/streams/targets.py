"""Where a stream's records go (``gateway/streams/session.py``): a ledger's write handle, the
same one ``POST /v1/ledgers/{id}/entries`` adds to, or a log's writer, the same one
``POST /v1/logs/{name}/records`` appends with, so the gateway's batching applies to
both paths alike."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from gateway import operations as ops
from gateway.http.auth import TokenCheck
from gateway.logs import operations as log_ops
from gateway.logs.writer import AppendOrder, AppendTurn, LogWriter
from gateway.passwords import check_password
from gateway.service import Gateway
from gateway.streams.session import StreamRecord, ledger_ack_json, log_ack_json, retrieve
from services.errors import InvalidArgument, NotWriter
from services.ledger_client.runners.write import AddOutcome, HandleRunner

Acks = list[str]  # one JSON text per record (gateway/streams/session.py, ``ledger_ack_json``)
# Appends of log streams that ended while their appends ran: kept referenced until done.
_RUNNING: set[asyncio.Task[Acks]] = set()


class _Authorized:
    """An auth message that comes although the headers were enough is checked too."""

    password_hash: str | None = None

    def __init__(self, check_token: TokenCheck) -> None:
        self.check_token = check_token

    async def late_auth(self, doc: dict[str, Any]) -> None:
        token = doc.get("token")
        refusal = self.check_token(token) if token is not None else None
        if refusal is not None:
            raise refusal
        if "password" in doc:
            await check_password(doc["password"], self.password_hash)


class LedgerTarget(_Authorized):
    accepts_keys = False

    def __init__(self, gw: Gateway, runner: HandleRunner, check_token: TokenCheck) -> None:
        super().__init__(check_token)
        self.gw = gw
        self.runner = runner
        self.password_hash = runner.metadata.password_hash

    async def submit(self, records: list[StreamRecord]) -> asyncio.Future[Acks]:
        added = await ops.submit_add(self.gw, self.runner, tuple(r.payload for r in records))
        acks: asyncio.Future[Acks] = asyncio.get_running_loop().create_future()
        acks.add_done_callback(retrieve)

        def done(future: asyncio.Future[AddOutcome]) -> None:
            error = future.exception()
            if error is not None:
                if not acks.done():
                    acks.set_exception(error)
                return
            outcome = future.result()
            if not acks.done():
                first, lac = outcome.first_entry_id, outcome.lac
                acks.set_result(
                    [ledger_ack_json(r.seq, first + i, lac) for i, r in enumerate(records)]
                )

        added.add_done_callback(done)
        return acks


class LogTarget(_Authorized):
    accepts_keys = True

    def __init__(self, gw: Gateway, name: str, writer: LogWriter, check_token: TokenCheck) -> None:
        super().__init__(check_token)
        self.gw = gw
        self.name = name
        self.writer = writer
        # The stream's groups land in the order sent, also when a fence or a roll makes
        # them settle and append again each on its own (gateway/logs/writer.py).
        self.order = AppendOrder()

    async def late_auth(self, doc: dict[str, Any]) -> None:
        if "password" in doc:
            raise InvalidArgument("logs have no password")
        await super().late_auth(doc)

    async def submit(self, records: list[StreamRecord]) -> asyncio.Future[Acks]:
        # Only the keyless records in a row are one group: a key is alone in its group.
        key = records[0].key
        fed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_fed() -> None:
            if not fed.done():
                fed.set_result(None)

        turn = self.order.turn()  # now, in the order the groups are submitted
        task = asyncio.create_task(self._append(records, key, on_fed, turn))
        _RUNNING.add(task)
        task.add_done_callback(_RUNNING.discard)
        task.add_done_callback(retrieve)

        def ended(_: asyncio.Task[Acks]) -> None:  # also when cancelled before it ran
            turn.end()
            on_fed()

        task.add_done_callback(ended)
        await fed
        return task

    async def _append(
        self,
        records: list[StreamRecord],
        key: str | None,
        fed: Callable[[], None],
        turn: AppendTurn,
    ) -> Acks:
        try:
            result = await self.writer.append([r.payload for r in records], key, fed, turn)
        except NotWriter as exc:
            raise await log_ops.not_writer(self.gw, self.name, exc) from None
        ledger_id, entry_id = result.first.ledger_id, result.first.entry_id
        return [log_ack_json(r.seq, ledger_id, entry_id + i) for i, r in enumerate(records)]
