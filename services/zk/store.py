"""The metadata store: ZooKeeper through kazoo, bridged once for asyncio.

kazoo runs its own I/O thread. Every call here uses kazoo's ``*_async``
methods and resolves an asyncio future from kazoo's callback with
``loop.call_soon_threadsafe``, so no event-loop thread ever blocks on
ZooKeeper. Watches and session-state changes are delivered on the event loop
the same way.

Session states (kazoo ``KazooState``): CONNECTED; SUSPENDED (connection lost,
the session may survive: do not assume ephemeral nodes, locks or leadership);
LOST (the session expired: ephemeral nodes are gone; kazoo reconnects with a
new session and reports CONNECTED again, and owners of ephemeral nodes must
re-create them). ``session`` is the session's id through SUSPENDED (None once
LOST): an ephemeral node whose owner is that session is still ours, so a caller
whose call failed with the connection waits it out (``wait_connected``) and reads
the node back rather than guessing (a create may have landed, a delete may not).

With credentials (``services/zk/auth.py``) the client authenticates on every
connection and every znode it creates, the chroot included, gets the ACL that gives
their principal all rights and nobody else any. ``start`` then reads the chroot before
it says it is connected, so a service with wrong credentials, or with none against a
locked tree, fails there with one clear message rather than at its first real call.

kazoo exceptions are mapped at this boundary into ``services.errors``: NoNode ->
``NodeNotFound``, NodeExists -> ``NodeExists``, NotEmpty -> ``NodeNotEmpty``,
BadVersion -> ``MetadataConflict``, connection problems and timeouts ->
``MetadataUnavailable``, and so is NoAuth (ZooKeeper refused the store's principal: the
metadata is out of its reach, the message says whose credentials were refused). The
``Node*`` errors are the store's vocabulary: callers
catch them (a missing znode is free, an existing one lost a race) and translate
them into API errors; they live in ``services.errors`` with the rest so that every
code is registered in one place.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
    UnimplementedError,
)
from kazoo.handlers.threading import KazooTimeoutError, SequentialThreadingHandler
from kazoo.protocol.states import KazooState
from kazoo.security import ACL

from services.errors import (
    MetadataConflict,
    MetadataUnavailable,
    NodeExists,
    NodeNotEmpty,
    NodeNotFound,
    QuireError,
)
from services.zk import paths as zkpaths
from services.zk.auth import ZkCredentials
from services.zk.limits import (
    CONNECT_ATTEMPT_TIMEOUT_S,
    CONNECT_DELAY_FIRST_S,
    CONNECT_DELAY_MAX_S,
    MULTI_READ_OPS_MAX,
    OPERATION_TIMEOUT_S,
    RECONNECT_DELAY_FIRST_S,
    RECONNECT_DELAY_MAX_S,
    STATE_POLL_S,
    WATCH_SETUP_THREADS_MAX,
)
from services.zk.multiread import MultiGetData

log = logging.getLogger(__name__)

_SEQ_ROLLOVER = (1 << 31) - 2


class _DropAll(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class Versioned:
    data: bytes
    version: int
    owner: int = 0  # the session holding an ephemeral znode (0: not ephemeral)
    mtime: int = 0  # when it was last changed (ms, ZooKeeper's clock; 0: not known)


@dataclass(frozen=True, slots=True)
class Check:
    """A transaction step: the znode exists (at ``version`` unless -1)."""

    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class SetData:
    """A transaction step: compare-and-set (at ``version`` unless -1)."""

    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class Delete:
    """A transaction step: delete the znode (at ``version`` unless -1)."""

    path: str
    version: int = -1


Step = Check | SetData | Delete


@dataclass(frozen=True, slots=True)
class _Failed:
    """A request of several gets that failed whole (its error stands for all of them)."""

    error: BaseException


def _collect(answers: Iterable[tuple[str, Any]], principal: str) -> list[Versioned | None]:
    """Gets' answers (a data and stat pair, kazoo's exception, or ``_Failed``) by path:
    the znodes in order, None for one that does not exist; the first other error is
    raised once all were looked at."""
    out: list[Versioned | None] = []
    failure: BaseException | None = None
    for path, answer in answers:
        if isinstance(answer, _Failed):
            failure = failure or _translate(answer.error, path, principal)
        elif isinstance(answer, NoNodeError):
            out.append(None)
        elif isinstance(answer, BaseException):
            failure = failure or _translate(answer, path, principal)
        else:
            data, stat = answer
            out.append(Versioned(data or b"", stat.version, stat.ephemeralOwner, stat.mtime))
    if failure is not None:
        raise failure
    return out


def _translate(exc: BaseException, path: str, principal: str) -> BaseException:
    if isinstance(exc, NoAuthError):
        return MetadataUnavailable(
            f"ZooKeeper denied {principal} access to {path} (NoAuth): the credentials are "
            "wrong, or none were given for a locked tree (--zk-auth-file or QUIRE_ZK_AUTH)"
        )
    if isinstance(exc, NoNodeError):
        return NodeNotFound(f"no znode {path}")
    if isinstance(exc, NodeExistsError):
        return NodeExists(f"znode {path} exists")
    if isinstance(exc, BadVersionError):
        return MetadataConflict(f"version of {path} changed")
    if isinstance(exc, NotEmptyError):
        return NodeNotEmpty(f"znode {path} has children")
    if isinstance(
        exc,
        ConnectionLoss
        | SessionExpiredError
        | ConnectionClosedError
        | OperationTimeoutError
        | KazooTimeoutError,
    ):
        return MetadataUnavailable(f"ZooKeeper unavailable ({type(exc).__name__}) at {path}")
    if isinstance(exc, KazooException):
        return MetadataUnavailable(f"ZooKeeper error {type(exc).__name__} at {path}")
    return exc


def dead_server_handler(session_timeout_s: float) -> SequentialThreadingHandler:
    """kazoo's threading handler whose connections to a server give up once data sent
    stays unacknowledged for kazoo's own read time-out (two thirds of the session
    time-out; Linux's ``TCP_USER_TIMEOUT``).

    kazoo counts every request it sends as a ping and checks for a missing ping answer
    only when nothing was sent for half that time-out. A client that keeps calling
    therefore never notices a server it can no longer reach (a partition that drops
    packets): its calls time out one by one while its session expires on the ensemble
    (measured on namespace hosts: 30–45 s before kazoo gave up on a server cut away,
    against a 4 s session). With the option, the kernel fails the connection once its
    requests go unacknowledged that long and kazoo moves to another server. A live but
    slow server still acknowledges the bytes, so it is not dropped."""
    handler = SequentialThreadingHandler()
    option = getattr(socket, "TCP_USER_TIMEOUT", None)
    if option is None:
        return handler
    connect = handler.create_connection
    timeout_ms = max(1, int(session_timeout_s * 1000 * 2 / 3))

    def create_connection(*args: Any, **kwargs: Any) -> socket.socket:
        sock: socket.socket = connect(*args, **kwargs)
        sock.setsockopt(socket.IPPROTO_TCP, option, timeout_ms)
        return sock

    handler.create_connection = create_connection
    return handler


class MetadataStore:
    """Versioned get / CAS set / create / delete / children / watches over kazoo."""

    def __init__(
        self,
        hosts: str,
        session_timeout_s: float = 10.0,
        operation_timeout_s: float = OPERATION_TIMEOUT_S,
        credentials: ZkCredentials | None = None,
    ) -> None:
        self.hosts = hosts
        self.session_timeout_s = session_timeout_s
        self.operation_timeout_s = operation_timeout_s
        self.credentials = credentials
        self.principal = (
            credentials.principal if credentials is not None else "a client without credentials"
        )
        self._client = KazooClient(
            hosts=hosts,
            timeout=session_timeout_s,
            handler=dead_server_handler(session_timeout_s),
            connection_retry={
                "max_tries": -1,
                "delay": RECONNECT_DELAY_FIRST_S,
                "max_delay": RECONNECT_DELAY_MAX_S,
            },
            **_auth_options(credentials),
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._starting: asyncio.Future[None] | None = None
        self._listeners: list[Callable[[str], None]] = []
        self.state = KazooState.LOST
        self._session: int | None = None
        self._watch_setup = ThreadPoolExecutor(WATCH_SETUP_THREADS_MAX, "zk-watch")
        # Whether ``get_many`` uses ZooKeeper's read-only multi: until a server refuses it.
        self._multi_read = True
        self._client.add_listener(self._on_state)

    @property
    def client(self) -> KazooClient:
        """The raw kazoo client, for kazoo recipes (election, locks) run in threads."""
        return self._client

    @property
    def connected(self) -> bool:
        return bool(self._client.connected)

    @property
    def session_id(self) -> int | None:
        """The session's id while connected (None while SUSPENDED or LOST)."""
        sid = self._client.client_id
        return sid[0] if sid else None

    @property
    def session(self) -> int | None:
        """The session's id, kept while SUSPENDED (the session, and its ephemeral nodes,
        may survive a dropped connection) and None from LOST until CONNECTED again."""
        return self._session

    async def wait_connected(self, timeout_s: float) -> bool:
        """Wait out SUSPENDED: True once connected (with this session or a new one: see
        ``session``), False when ``timeout_s`` passed first."""
        deadline = time.monotonic() + timeout_s
        while not self.connected:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(STATE_POLL_S)
        return True

    async def start(self, timeout_s: float = 30.0) -> None:
        """Connect (creating the chroot if missing); raise ``MetadataUnavailable`` on time-out."""
        self._loop = asyncio.get_running_loop()
        # The chroot follows the last host ("h1:2181,h2:2181/quire"), the one host or many.
        chroot = ""
        if "/" in self.hosts:
            chroot = "/" + self.hosts.split("/", 1)[1]
        # Shielded: a caller cancelled meanwhile (shutdown) leaves the attempt running in
        # its thread, and ``stop`` waits for it before stopping the client.
        self._starting = asyncio.ensure_future(
            asyncio.to_thread(self._start_sync, chroot, timeout_s)
        )
        await asyncio.shield(self._starting)

    def _start_sync(self, chroot: str, timeout_s: float) -> None:
        try:
            if chroot:
                self._ensure_chroot(chroot, timeout_s)
            self._client.start(timeout_s)
        except KazooTimeoutError as exc:
            raise MetadataUnavailable(f"cannot reach ZooKeeper at {self.hosts}") from exc
        except KazooException as exc:
            raise _translate(exc, chroot or "/", self.principal) from exc
        # Reading the chroot needs the READ right: a principal that may not use the
        # tree is told here, once per attempt, not by its first real call.
        try:
            self._client.get_async("/").get(timeout=timeout_s)
        except KazooTimeoutError as exc:
            raise MetadataUnavailable(f"cannot reach ZooKeeper at {self.hosts}") from exc
        except KazooException as exc:
            raise _translate(exc, chroot or "/", self.principal) from exc

    async def start_retrying(
        self,
        attempt_timeout_s: float = CONNECT_ATTEMPT_TIMEOUT_S,
        delay_first_s: float = CONNECT_DELAY_FIRST_S,
        delay_max_s: float = CONNECT_DELAY_MAX_S,
    ) -> None:
        """Connect like ``start``, retrying with exponential back-off until connected (or
        cancelled), so that a service can serve ``/health`` (503) meanwhile. Each failed
        attempt is logged once, with the delay before the next; kazoo's own warnings, one
        per refused socket several times a second, are held back until connected (for
        good when cancelled or failed first: the process is shutting down)."""
        kazoo_log = logging.getLogger("kazoo.client")
        quiet = _DropAll()
        kazoo_log.addFilter(quiet)
        delay = delay_first_s
        for attempt in itertools.count(1):
            try:
                await self.start(attempt_timeout_s)
            except MetadataUnavailable as exc:
                log.warning("%s (attempt %d); next attempt in %.1f s", exc.message, attempt, delay)
            else:
                kazoo_log.removeFilter(quiet)
                log.info("connected to ZooKeeper at %s (attempt %d)", self.hosts, attempt)
                return
            await asyncio.sleep(delay)
            delay = min(2 * delay, delay_max_s)
        raise AssertionError("unreachable")

    def _ensure_chroot(self, chroot: str, timeout_s: float) -> None:
        base = self.hosts.split("/", 1)[0]
        bootstrap = KazooClient(hosts=base, timeout=10.0, **_auth_options(self.credentials))
        bootstrap.start(timeout_s)
        try:
            bootstrap.ensure_path(chroot)
        finally:
            bootstrap.stop()
            bootstrap.close()

    async def stop(self) -> None:
        starting = self._starting
        if starting is not None and not starting.done():
            await asyncio.wait({starting})
        if starting is not None and starting.done() and not starting.cancelled():
            starting.exception()  # retrieved: its caller may have been cancelled
        await asyncio.to_thread(self._stop_sync)

    def _stop_sync(self) -> None:
        self._watch_setup.shutdown(wait=False, cancel_futures=True)
        try:
            self._client.stop()
            self._client.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            log.debug("error closing ZooKeeper client", exc_info=True)

    # -- session state ----------------------------------------------------

    def add_state_listener(self, callback: Callable[[str], None]) -> None:
        """``callback(state)`` on the event loop for CONNECTED / SUSPENDED / LOST."""
        self._listeners.append(callback)

    def _on_state(self, state: str) -> None:
        self.state = state
        if state == KazooState.CONNECTED:
            sid = self._client.client_id  # set before kazoo reports CONNECTED
            self._session = sid[0] if sid else None
        elif state == KazooState.LOST:
            self._session = None
        log.info("ZooKeeper session state: %s", state)
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        for callback in self._listeners:
            loop.call_soon_threadsafe(callback, state)

    # -- the async bridge -------------------------------------------------

    async def _call(self, path: str, method: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def done(result: Any) -> None:
            try:
                value = result.get_nowait()
            except BaseException as exc:  # noqa: BLE001 - delivered to the awaiting task
                err = _translate(exc, path, self.principal)
                loop.call_soon_threadsafe(_set_exception, future, err, exc)
            else:
                loop.call_soon_threadsafe(_set_result, future, value)

        try:
            method(*args, **kw).rawlink(done)
        except BaseException as exc:  # noqa: BLE001
            raise _translate(exc, path, self.principal) from exc
        try:
            async with asyncio.timeout(self.operation_timeout_s):
                return await future
        except TimeoutError as exc:
            raise MetadataUnavailable(f"ZooKeeper did not answer in time at {path}") from exc

    async def get(self, path: str) -> Versioned:
        data, stat = await self._call(path, self._client.get_async, path)
        return Versioned(data or b"", stat.version, stat.ephemeralOwner, stat.mtime)

    async def get_many(self, paths: Sequence[str]) -> list[Versioned | None]:
        """Read many znodes at once, None for those that do not exist. Raises the first
        other error (``MetadataUnavailable`` ...) after all answered.

        The reads go as ZooKeeper read-only multis (``services/zk/multiread.py``), at most
        ``MULTI_READ_OPS_MAX`` to a request, all requests pipelined: one request, one
        answer and one wake-up of kazoo's thread per batch rather than per znode, about
        20 times the rate of single reads here (benchmarks/README.md "Metadata at a
        million ledgers"). A znode deleted since its caller listed it is one failed
        operation (None), not a failed request. A server that does not know the multi
        (ZooKeeper before 3.6) refuses it, and drops the connection: this store then
        reads znode by znode for the rest of its life (``_get_many_single``), once the
        connection is back."""
        if not paths:
            return []
        if not self._multi_read:
            return await self._get_many_single(paths)
        chroot = self._client.chroot  # kazoo applies it to its own calls, not to ours
        batches = [
            list(paths[i : i + MULTI_READ_OPS_MAX])
            for i in range(0, len(paths), MULTI_READ_OPS_MAX)
        ]

        def start(batch: list[str]) -> Callable[[], Any]:
            def call() -> Any:
                answer = self._client.handler.async_result()
                full = [chroot + p if p != "/" else chroot or "/" for p in batch]
                self._client._call(MultiGetData(full), answer)
                return answer

            return call

        answers = await self._pipelined([start(b) for b in batches], f"{len(paths)} reads")
        if any(isinstance(a, UnimplementedError) for a in answers):
            self._multi_read = False
            log.warning(
                "ZooKeeper does not know the read-only multi (a server before 3.6): "
                "this store reads znodes one by one from now on"
            )
            await self.wait_connected(self.operation_timeout_s)
            try:
                return await self._get_many_single(paths)
            except MetadataUnavailable:
                # The server drops the connection after its UNIMPLEMENTED; reads sent
                # before that drop was seen were lost with it (ConnectionLoss, seen in a
                # full test run). Reads are safe to ask again, once connected anew.
                await self.wait_connected(self.operation_timeout_s)
                return await self._get_many_single(paths)
        pairs: list[tuple[str, Any]] = []
        for batch, answer in zip(batches, answers, strict=True):
            if isinstance(answer, BaseException):  # the whole request failed
                pairs.append((batch[0], _Failed(answer)))
            else:
                pairs += zip(batch, answer, strict=True)
        return _collect(pairs, self.principal)

    async def _get_many_single(self, paths: Sequence[str]) -> list[Versioned | None]:
        """``get_many`` as one pipelined get per znode (a server without the multi)."""
        answers = await self._pipelined(
            [functools.partial(self._client.get_async, path) for path in paths],
            f"{len(paths)} reads",
        )
        return _collect(zip(paths, answers, strict=True), self.principal)

    async def _pipelined(self, calls: Sequence[Callable[[], Any]], what: str) -> list[Any]:
        """Start every kazoo call of ``calls`` (each returns kazoo's async result) at
        once; their values or kazoo's exceptions, in order. The event loop is woken once,
        when the last answer is in (a future per call, as ``_call`` makes, costs ~3x
        kazoo's own rate)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        results: list[Any] = [None] * len(calls)
        remaining = [len(calls)]
        lock = threading.Lock()

        def answer(index: int) -> Callable[[Any], None]:
            def done(result: Any) -> None:
                try:
                    value = result.get_nowait()
                except BaseException as exc:  # noqa: BLE001 - delivered to the awaiting task
                    value = exc
                results[index] = value
                with lock:
                    remaining[0] -= 1
                    last = remaining[0] == 0
                if last:
                    loop.call_soon_threadsafe(_set_result, future, None)

            return done

        for index, call in enumerate(calls):
            try:
                call().rawlink(answer(index))
            except BaseException as exc:  # noqa: BLE001
                future.cancel()
                raise _translate(exc, what, self.principal) from exc
        try:
            async with asyncio.timeout(self.operation_timeout_s):
                await future
        except TimeoutError as exc:
            raise MetadataUnavailable(f"ZooKeeper did not answer {what} in time") from exc
        return results

    async def get_or_none(self, path: str) -> Versioned | None:
        try:
            return await self.get(path)
        except NodeNotFound:
            return None

    async def sync(self, path: str) -> None:
        """Bring the server this session reads from up to date with the leader for
        ``path``: a read after it sees every change committed before it began (ZooKeeper's
        reads are otherwise served from a server that may be behind)."""
        await self._call(path, self._client.sync_async, path)

    async def exists(self, path: str) -> bool:
        stat = await self._call(path, self._client.exists_async, path)
        return stat is not None

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = True,
    ) -> str:
        """Create a znode; return its path (with the sequence suffix when ``sequence``)."""
        created = await self._call(
            path,
            self._client.create_async,
            path,
            data,
            ephemeral=ephemeral,
            sequence=sequence,
            makepath=makepath,
        )
        return str(created)

    async def create_ephemeral(self, path: str, data: bytes = b"") -> int:
        """Create an ephemeral znode (and its parents); return its owner, the session that
        holds it, as ZooKeeper answered it (not ``session`` read afterwards, which a
        session lost meanwhile would have changed)."""
        _, stat = await self._call(
            path,
            self._client.create_async,
            path,
            data,
            ephemeral=True,
            makepath=True,
            include_data=True,
        )
        return int(stat.ephemeralOwner)

    async def set(self, path: str, data: bytes, version: int = -1) -> int:
        """Compare-and-set: write only if the znode is at ``version``; return the new version."""
        stat = await self._call(path, self._client.set_async, path, data, version)
        return int(stat.version)

    async def set_acls(self, path: str, acl: Sequence[ACL]) -> None:
        """Replace the znode's ACL (needs the ADMIN right on it): ``services/zk/acls.py``
        locks a tree made before the cluster had credentials."""
        await self._call(path, self._client.set_acls_async, path, list(acl))

    async def delete(self, path: str, version: int = -1) -> None:
        await self._call(path, self._client.delete_async, path, version)

    async def transaction(self, steps: Sequence[Step]) -> tuple[int, QuireError] | None:
        """Apply ``steps`` all or none (one ZooKeeper multi): None when applied, else the
        index of the first step that failed and its error (``NodeNotFound``,
        ``MetadataConflict`` ...), nothing applied. ``MetadataUnavailable`` is raised:
        the outcome is then unknown, as for any write."""
        transaction = self._client.transaction()
        for step in steps:
            if isinstance(step, Check):
                transaction.check(step.path, step.version)
            elif isinstance(step, SetData):
                transaction.set_data(step.path, step.data, step.version)
            else:
                transaction.delete(step.path, step.version)
        where = steps[0].path if steps else "/"
        results = await self._call(where, transaction.commit_async)
        for index, (step, result) in enumerate(zip(steps, results, strict=True)):
            if isinstance(result, RolledBackError | RuntimeInconsistency):
                continue
            if isinstance(result, BaseException):
                error = _translate(result, step.path, self.principal)
                if isinstance(error, MetadataUnavailable):
                    raise error from result
                if isinstance(error, QuireError):
                    return index, error
                raise error from result
        return None

    async def delete_recursive(self, path: str) -> None:
        """Delete a subtree (children first); a missing node is not an error."""
        try:
            children = await self.children(path)
        except NodeNotFound:
            return
        for child in children:
            await self.delete_recursive(f"{path}/{child}")
        try:
            await self.delete(path)
        except NodeNotFound:
            pass

    async def children(self, path: str) -> list[str]:
        return sorted(await self._call(path, self._client.get_children_async, path))

    async def ensure_path(self, path: str) -> None:
        await self._call(path, self._client.ensure_path_async, path)

    # -- watches ----------------------------------------------------------

    # kazoo's DataWatch and ChildrenWatch read the znode when they are made, in their
    # caller's thread, retrying for as long as ZooKeeper does not answer: they are made
    # in threads of their own (``_watch_setup``), never on the event loop. A watch call
    # returns at once; the future it returns completes once the watch is set and its
    # first call is queued on the loop (it runs before whoever awaits the future).

    def watch_children(
        self, path: str, callback: Callable[[list[str]], None]
    ) -> asyncio.Future[None]:
        """Call ``callback(children)`` on the loop soon and on every change, until ``stop``.

        The znode must exist (``ensure_path`` it first)."""
        loop = asyncio.get_running_loop()

        def on_change(children: list[str] | None) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(callback, sorted(children or []))

        return self._set_watch(loop, path, lambda: self._client.ChildrenWatch(path, on_change))

    async def exists_once(self, path: str, on_change: Callable[[], None]) -> bool:
        """Whether the znode exists, and ``on_change()`` on the loop once, at its next
        change (created, deleted, data set): a one-shot watch, unlike ``watch_data``
        (the election watches each predecessor once)."""
        loop = asyncio.get_running_loop()

        def fired(_event: Any) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(on_change)

        stat = await self._call(path, self._client.exists_async, path, watch=fired)
        return stat is not None

    def watch_data(
        self, path: str, callback: Callable[[Versioned | None], None]
    ) -> asyncio.Future[None]:
        """Call ``callback(Versioned | None)`` on the loop soon and on every change."""
        loop = asyncio.get_running_loop()

        def on_change(data: bytes | None, stat: Any) -> None:
            value = (
                None
                if stat is None
                else Versioned(data or b"", stat.version, stat.ephemeralOwner, stat.mtime)
            )
            if not loop.is_closed():
                loop.call_soon_threadsafe(callback, value)

        return self._set_watch(loop, path, lambda: self._client.DataWatch(path, on_change))

    def _set_watch(
        self, loop: asyncio.AbstractEventLoop, path: str, make: Callable[[], object]
    ) -> asyncio.Future[None]:
        def setting() -> None:
            make()

        future = loop.run_in_executor(self._watch_setup, setting)
        future.add_done_callback(lambda done: _log_watch_failure(done, path))
        return future

    # -- ledger ids ---------------------------------------------------------

    async def generate_ledger_id(self) -> int:
        """A new unique 64-bit ledger id.

        ZooKeeper's sequence counters are 31-bit, so the id is
        ``(hob << 31) | seq``: ``seq`` is the sequence number of a transient
        node under ``/idgen/{hob}`` (deleted at once, so the tree stays
        small); when ``seq`` nears the end of its range the generator moves to
        ``hob + 1``.
        """
        while True:
            try:
                hobs = [int(h) for h in await self.children(zkpaths.IDGEN) if h.isdigit()]
            except NodeNotFound:
                hobs = []
            hob = max(hobs, default=0)
            created = await self.create(f"{zkpaths.IDGEN}/{hob:010d}/ID-", sequence=True)
            seq = int(created.rsplit("-", 1)[1])
            try:
                await self.delete(created)
            except NodeNotFound:
                pass
            if seq < _SEQ_ROLLOVER:
                return (hob << 31) | seq
            try:
                await self.create(f"{zkpaths.IDGEN}/{hob + 1:010d}")
            except NodeExists:
                pass


def _auth_options(credentials: ZkCredentials | None) -> dict[str, Any]:
    """kazoo's options for ``credentials``: the digest sent on each connection and the
    ACL of each znode created; none without credentials (kazoo's open ACL)."""
    if credentials is None:
        return {}
    return {"auth_data": credentials.auth_data(), "default_acl": credentials.acl()}


def _log_watch_failure(done: asyncio.Future[None], path: str) -> None:
    """Retrieve a watch's failure (so that an unawaited one is not lost) and log it."""
    if not done.cancelled() and done.exception() is not None:
        log.warning("watching %s failed: %r", path, done.exception())


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], err: BaseException, cause: BaseException) -> None:
    if not future.done():
        if err is not cause:
            err.__cause__ = cause
        future.set_exception(err)
