"""Request ids (services/request_ids.py) and their place in the JSON log lines
(services/json_logging.py): a sane id is kept, anything else is replaced by a new one, and a
line emitted while an id is set carries it."""

from __future__ import annotations

import io
import json
import logging
import os
import re
from collections.abc import Iterator

import pytest
from kazoo.protocol.serialization import Auth, Create

from services.json_logging import JsonFormatter, RequestIdFilter
from services.request_ids import (
    REQUEST_ID,
    REQUEST_ID_MAX_CHARS,
    REQUEST_ID_SCOPE_KEY,
    is_sane,
    new_request_id,
    request_id_from,
    scope_request_id,
)
from services.zk.auth import ZkCredentials

NEW_ID = re.compile(r"[0-9a-f]{32}")


@pytest.mark.parametrize(
    "raw",
    [
        b"a",
        b"req-42",
        b"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
        b"svc:orders.v2_retry-3",
        b"x" * REQUEST_ID_MAX_CHARS,
    ],
)
def test_a_sane_id_is_kept(raw: bytes) -> None:
    """1-128 characters of A-Za-z0-9._:- are taken as they are."""
    assert is_sane(raw)
    assert request_id_from(raw) == raw.decode()


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"x" * (REQUEST_ID_MAX_CHARS + 1),
        b"has space",
        b"line\r\nX-Injected: 1",
        b"quote\"and'<tag>",
        b"slash/and?query",
        "caf\u00e9".encode(),
        b"\x00\xff",
        b"ok\n",
    ],
)
def test_anything_else_is_replaced_not_reflected(raw: bytes) -> None:
    """An empty, too long or oddly spelled id is replaced by a new 32-hex-digit id."""
    assert not is_sane(raw)
    replaced = request_id_from(raw)
    assert NEW_ID.fullmatch(replaced), replaced
    assert replaced.encode() != raw


def test_a_missing_id_gets_a_new_one_each_time() -> None:
    """No header: a new id, different for every request."""
    ids = {request_id_from(None) for _ in range(1000)}
    assert len(ids) == 1000
    assert all(NEW_ID.fullmatch(i) for i in ids)
    assert NEW_ID.fullmatch(new_request_id())


def test_scope_request_id_prefers_the_chosen_one() -> None:
    """The id the middleware chose wins; else the scope's sane header; else a new id."""
    headers = [(b"x-request-id", b"from-header")]
    assert scope_request_id({REQUEST_ID_SCOPE_KEY: "chosen", "headers": headers}) == "chosen"
    assert scope_request_id({"headers": headers}) == "from-header"
    assert NEW_ID.fullmatch(scope_request_id({"headers": [(b"x-request-id", b"bad id")]}))
    assert NEW_ID.fullmatch(scope_request_id({}))


@pytest.fixture
def json_lines() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger writing JSON lines through the services' formatter and filter."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter("test"))
    handler.addFilter(RequestIdFilter())
    logger = logging.getLogger("tests.request_ids")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield logger, out
    finally:
        logger.removeHandler(handler)


def test_log_lines_carry_the_current_request_id(
    json_lines: tuple[logging.Logger, io.StringIO],
) -> None:
    """A line emitted while an id is set has it as ``request_id``; one outside has none;
    secret fields are still masked."""
    logger, out = json_lines
    logger.info("outside")
    token = REQUEST_ID.set("req-7")
    try:
        logger.info("inside", extra={"fields": {"ledger_id": 3, "api_token": "t0ps3cret"}})
    finally:
        REQUEST_ID.reset(token)
    logger.info("after")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["msg"] for line in lines] == ["outside", "inside", "after"]
    assert "request_id" not in lines[0] and "request_id" not in lines[2]
    assert lines[1]["request_id"] == "req-7"
    assert lines[1]["ledger_id"] == 3 and lines[1]["api_token"] == "***"
    assert "t0ps3cret" not in out.getvalue()


def test_new_ids_are_32_hex_digits_unique_and_differ_in_a_forked_child() -> None:
    """Fresh ids come from ``random``: never repeated in a process, and a forked child
    (reseeded at fork) does not repeat its parent's next ids."""
    ids = {new_request_id() for _ in range(50_000)}
    assert len(ids) == 50_000
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids to the parent, then out at once
        try:
            os.write(write_end, "".join(new_request_id() for _ in range(4)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        child = os.read(read_end, 1024).decode()
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    parent = "".join(new_request_id() for _ in range(4))
    assert len(child) == len(parent) == 128 and child != parent


def test_library_dumps_of_secret_headers_and_auth_messages_are_masked(
    json_lines: tuple[logging.Logger, io.StringIO],
) -> None:
    """A library's debug dump of a request's headers (websockets: ``< name: value``) or
    of a WebSocket auth message keeps the names and masks the secret values, cut short
    or not; other lines are untouched."""
    logger, out = json_lines
    logger.debug("< %s: %s", "Authorization", "Bearer t0ps3cret-1")
    logger.debug("< %s: %s", "x-ledger-password", "t0ps3cret-2")
    logger.debug("> %s: %s", "X-Cluster-Secret", "t0ps3cret-3")
    logger.debug("< TEXT %r [40 bytes]", '{"token": "t0ps3cret-4", "password": "t0ps3cret-5"}')
    logger.debug("< TEXT %s", """'{"token": "t0ps3cret-6...""")
    logger.info("< host: 127.0.0.1:8080")
    lines = [json.loads(line)["msg"] for line in out.getvalue().splitlines()]
    assert "t0ps3cret" not in out.getvalue()
    assert lines[0] == "< Authorization: ***" and lines[2] == "> X-Cluster-Secret: ***"
    assert '"token": "***"' in lines[3] and '"password": "***"' in lines[3]
    assert lines[5] == "< host: 127.0.0.1:8080"


def test_kazoo_dumps_of_zookeeper_credentials_are_masked(
    json_lines: tuple[logging.Logger, io.StringIO],
) -> None:
    """kazoo's debug dump of the requests it sends shows the ZooKeeper credentials of an
    ``Auth`` and the password digest of a digest ACL: both are masked, whatever quotes
    the password holds (docs/security.md, "ZooKeeper authentication")."""
    logger, out = json_lines
    credentials = ZkCredentials.parse("quire:t0ps3cret-1'\"x", "test")
    scheme, auth = credentials.auth_data()[0]
    logger.debug("Sending request(xid=%s): %s", -4, Auth(0, scheme, auth))
    logger.debug("Sending request(xid=%s): %s", 7, Create("/quire", b"", credentials.acl(), 0))
    digest = credentials.acl()[0].id.id.split(":", 1)[1]
    assert "t0ps3cret" not in out.getvalue() and digest not in out.getvalue()
    lines = [json.loads(line)["msg"] for line in out.getvalue().splitlines()]
    assert "scheme='digest', auth='***')" in lines[0]
    assert "id='quire:***'" in lines[1]
