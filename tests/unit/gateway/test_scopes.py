"""Scoped tokens (gateway/http/scopes.py, token_file.py, auth.py) without processes: the
token file's parsing, what each /v1 call needs, and the 401/403 decisions, as
docs/api.md "Scoped tokens" states them."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from gateway import limits
from gateway.http.auth import TokenMiddleware, TokenPolicy
from gateway.http.scopes import (
    Access,
    Scope,
    Target,
    TokenFileError,
    parse_tokens,
    required_access,
    token_digest,
)
from gateway.http.token_file import TokenFile
from services.errors import Forbidden, Unauthorized
from services.web.errors import install_error_handlers

WRITER, READER, ADMIN, LEDGERS = "w-orders-1f3a", "r-all-77c0", "a-all-0d9e", "w-ledgers-5b2e"

FILE = f"""
# comments are allowed
[[token]]
name = "orders-writer"
sha256 = "{token_digest(WRITER)}"
scope = "write"
logs = ["orders-*", "audit"]

[[token]]
name = "reader"
sha256 = "{token_digest(READER).upper()}"
scope = "read"
ledgers = "*"
logs = "*"

[[token]]
name = "admin"
sha256 = "{token_digest(ADMIN)}"
scope = "admin"
ledgers = ["*"]
logs = ["*"]

[[token]]
name = "ledgers"
sha256 = "{token_digest(LEDGERS)}"
scope = "write"
ledgers = [7, "100-199", "150-250", "300"]
"""


def test_parse_tokens_reads_names_scopes_and_what_they_cover() -> None:
    """Each [[token]] gives a name, the SHA-256 (any case), a scope and its cover;
    overlapping ledger ranges merge; a token is found by its bytes, nothing else."""
    table = parse_tokens(FILE)
    assert len(table) == 4
    writer = table.lookup(WRITER.encode())
    assert writer is not None and writer.name == "orders-writer" and writer.scope is Scope.WRITE
    assert writer.log_prefixes == ("orders-",) and writer.log_names == frozenset({"audit"})
    assert not writer.all_ledgers and writer.ledger_starts == ()
    reader = table.lookup(READER.encode())
    assert reader is not None and reader.all_ledgers and reader.all_logs
    ledgers = table.lookup(LEDGERS.encode())
    assert ledgers is not None
    ranges = list(zip(ledgers.ledger_starts, ledgers.ledger_ends, strict=True))
    assert ranges == [(7, 7), (100, 250), (300, 300)]
    for lid, covered in ((6, False), (7, True), (8, False), (100, True), (250, True),
                         (251, False), (299, False), (300, True), (301, False)):  # fmt: skip
        assert ledgers.covers_ledger(lid) is covered, lid
    assert table.lookup(WRITER.encode() + b"x") is None
    assert table.lookup(token_digest(WRITER).encode()) is None  # the hash is not the token
    assert table.lookup(b"") is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[[token]\n", "not valid TOML"),
        ('tokens = []\n', "unknown top-level keys"),
        ('token = "x"\n', "array of tables"),
        ('[[token]]\nsha256 = "{d}"\nscope = "read"\nlogs = "*"\n', "'name'"),
        ('[[token]]\nname = "a b"\nsha256 = "{d}"\nscope = "read"\nlogs = "*"\n', "'name'"),
        ('[[token]]\nname = "a"\ntoken = "PLAINSECRET"\nscope = "read"\nlogs = "*"\n',
         "never the token itself"),
        ('[[token]]\nname = "a"\nsha256 = "abc"\nscope = "read"\nlogs = "*"\n', "64 hex"),
        ('[[token]]\nname = "a"\nsha256 = "{d}"\nscope = "owner"\nlogs = "*"\n', "'scope'"),
        ('[[token]]\nname = "a"\nsha256 = "{d}"\nscope = "read"\n', "covers nothing"),
        ('[[token]]\nname = "a"\nsha256 = "{d}"\nscope = "read"\nlogs = "*"\nx = 1\n',
         "unknown keys"),
        ('[[token]]\nname = "a"\nsha256 = "{d}"\nscope = "read"\nledgers = ["9-3"]\n',
         "'ledgers' items"),
        ('[[token]]\nname = "a"\nsha256 = "{d}"\nscope = "read"\nledgers = [-1]\n',
         "'ledgers' items"),
        ('[[token]]\nname = "a"\nsha256 = "{d}"\nscope = "read"\nledgers = 5\n',
         "a list or"),
        ('[[token]]\nname = "a"\nsha256 = "{d}"\nscope = "read"\nlogs = ["a/b"]\n',
         "'logs' items"),
        ('[[token]]\nname = "a"\nsha256 = "{d}"\nscope = "read"\nlogs = ["a*b"]\n',
         "'logs' items"),
        ('[[token]]\nname = "a"\nsha256 = "{d}"\nscope = "read"\nlogs = "*"\n' * 2,
         "used twice"),
        ('[[token]]\nname = "a"\nsha256 = "{d}"\nscope = "read"\nlogs = "*"\n'
         '[[token]]\nname = "b"\nsha256 = "{d}"\nscope = "read"\nlogs = "*"\n',
         "same sha256"),
    ],
)  # fmt: skip
def test_parse_tokens_refuses_a_bad_file_without_repeating_a_secret(text: str, says: str) -> None:
    """A file that cannot be used is refused with what is wrong and where; the message
    never holds a token or a hash."""
    digest = token_digest("some-token")
    with pytest.raises(TokenFileError) as caught:
        parse_tokens(text.replace("{d}", digest))
    assert says in str(caught.value)
    assert digest not in str(caught.value) and "PLAINSECRET" not in str(caught.value)


def test_parse_tokens_bounds_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """More tokens, or more items in one token, than the bounds is refused."""
    monkeypatch.setattr(limits, "TOKENS_MAX", 1)
    monkeypatch.setattr(limits, "TOKEN_COVERS_MAX", 2)
    with pytest.raises(TokenFileError, match="more than 1"):
        parse_tokens(FILE)
    one = f'[[token]]\nname = "a"\nsha256 = "{token_digest("x")}"\nscope = "read"\n'
    with pytest.raises(TokenFileError, match="more than 2 'ledgers'"):
        parse_tokens(one + "ledgers = [1, 2, 3]\n")
    assert len(parse_tokens(one + "ledgers = [1, 2]\n")) == 1


@pytest.mark.parametrize(
    ("method", "path", "query", "websocket", "access"),
    [
        ("GET", "/v1/ledgers", b"", False, Access(Scope.READ, Target.ALL_LEDGERS)),
        ("POST", "/v1/ledgers", b"", False, Access(Scope.WRITE, Target.ALL_LEDGERS)),
        ("GET", "/v1/ledgers/7", b"", False, Access(Scope.READ, Target.LEDGER, 7)),
        ("HEAD", "/v1/ledgers/7/entries", b"", False, Access(Scope.READ, Target.LEDGER, 7)),
        ("POST", "/v1/ledgers/7/entries", b"", False, Access(Scope.WRITE, Target.LEDGER, 7)),
        ("POST", "/v1/ledgers/7/close", b"", False, Access(Scope.WRITE, Target.LEDGER, 7)),
        ("POST", "/v1/ledgers/7/recover", b"", False, Access(Scope.WRITE, Target.LEDGER, 7)),
        ("DELETE", "/v1/ledgers/7", b"", False, Access(Scope.ADMIN, Target.LEDGER, 7)),
        ("GET", "/v1/ledgers/07", b"", False, Access(Scope.READ, Target.ALL_LEDGERS)),
        ("GET", "/v1/ledgers/7/stream", b"", True, Access(Scope.WRITE, Target.LEDGER, 7)),
        ("GET", "/v1/logs", b"", False, Access(Scope.READ, Target.LOG_PREFIX)),
        ("GET", "/v1/logs", b"prefix=orders-e&limit=3", False,
         Access(Scope.READ, Target.LOG_PREFIX, name="orders-e")),
        ("GET", "/v1/logs", b"prefix=orders-e&prefix=b", False,
         Access(Scope.READ, Target.LOG_PREFIX, name="")),
        ("PUT", "/v1/logs/orders-eu", b"", False,
         Access(Scope.WRITE, Target.LOG, name="orders-eu")),
        ("GET", "/v1/logs/orders-eu/records", b"", False,
         Access(Scope.READ, Target.LOG, name="orders-eu")),
        ("POST", "/v1/logs/orders-eu/records", b"", False,
         Access(Scope.WRITE, Target.LOG, name="orders-eu")),
        ("POST", "/v1/logs/orders-eu/truncate", b"before=1:0", False,
         Access(Scope.ADMIN, Target.LOG, name="orders-eu")),
        ("DELETE", "/v1/logs/orders-eu", b"", False,
         Access(Scope.ADMIN, Target.LOG, name="orders-eu")),
        ("GET", "/v1/logs/orders-eu/stream", b"", True,
         Access(Scope.WRITE, Target.LOG, name="orders-eu")),
        ("GET", "/v1/admin/cluster", b"", False, Access(Scope.READ, Target.CLUSTER)),
        ("POST", "/v1/admin/audit", b"", False, Access(Scope.ADMIN, Target.CLUSTER)),
        ("GET", "/v1/nope", b"", False, Access(Scope.READ, Target.NOTHING)),
        ("GET", "/v1", b"", False, Access(Scope.READ, Target.NOTHING)),
    ],
)  # fmt: skip
def test_required_access(
    method: str, path: str, query: bytes, websocket: bool, access: Access
) -> None:
    """docs/api.md "Scoped tokens": GETs read, changes write, deletes and truncation are
    admin; a ledger's routes are on its id, a log's on its name, listing and creating
    ledgers on every ledger, the Admin API on the cluster."""
    assert required_access(method, path, query, websocket) == access


def _policy(tmp_path: Path, api: str | None = None, admin: str | None = None) -> TokenPolicy:
    path = tmp_path / "tokens.toml"
    path.write_text(FILE)
    return TokenPolicy(api, admin, TokenFile(path))


@pytest.mark.parametrize(
    ("token", "method", "path", "query", "refusal"),
    [
        (WRITER, "POST", "/v1/logs/orders-eu/records", b"", None),
        (WRITER, "GET", "/v1/logs/orders-eu/records", b"", None),
        (WRITER, "PUT", "/v1/logs/audit", b"", None),
        (WRITER, "PUT", "/v1/logs/auditor", b"", Forbidden),  # an exact name, not a prefix
        (WRITER, "POST", "/v1/logs/billing/records", b"", Forbidden),
        (WRITER, "DELETE", "/v1/logs/orders-eu", b"", Forbidden),
        (WRITER, "POST", "/v1/logs/orders-eu/truncate", b"", Forbidden),
        (WRITER, "GET", "/v1/logs", b"prefix=orders-x", None),
        (WRITER, "GET", "/v1/logs", b"", Forbidden),
        (WRITER, "GET", "/v1/logs", b"prefix=audit", Forbidden),
        (WRITER, "POST", "/v1/ledgers", b"", Forbidden),
        (WRITER, "GET", "/v1/ledgers/7", b"", Forbidden),
        (WRITER, "GET", "/v1/admin/cluster", b"", Forbidden),
        (WRITER, "GET", "/v1/nope", b"", None),  # its 404
        (READER, "GET", "/v1/ledgers/7/entries", b"", None),
        (READER, "GET", "/v1/admin/cluster", b"", None),
        (READER, "POST", "/v1/admin/audit", b"", Forbidden),
        (READER, "POST", "/v1/ledgers/7/entries", b"", Forbidden),
        (READER, "POST", "/v1/logs/orders-eu/records", b"", Forbidden),
        (ADMIN, "DELETE", "/v1/ledgers/7", b"", None),
        (ADMIN, "POST", "/v1/admin/replication/disable", b"", None),
        (LEDGERS, "POST", "/v1/ledgers/120/entries", b"", None),
        (LEDGERS, "POST", "/v1/ledgers/260/entries", b"", Forbidden),
        (LEDGERS, "POST", "/v1/ledgers", b"", Forbidden),
        (LEDGERS, "GET", "/v1/logs/a", b"", Forbidden),
        ("unknown-token", "GET", "/v1/ledgers/7", b"", Unauthorized),
        (None, "GET", "/v1/ledgers/7", b"", Unauthorized),
        (None, "GET", "/v1/nope", b"", Unauthorized),
    ],
)
def test_policy_decisions(
    tmp_path: Path,
    token: str | None,
    method: str,
    path: str,
    query: bytes,
    refusal: type[Exception] | None,
) -> None:
    """docs/api.md "Scoped tokens": an unknown or missing token is 401; a known one whose
    scope does not allow the call is 403 forbidden, naming its name and the scope it
    lacks, never the token."""
    policy = _policy(tmp_path)
    given = token.encode() if token is not None else None
    answer = policy.check(method, path, query, given)
    if refusal is None:
        assert answer is None
        return
    assert type(answer) is refusal
    if token is not None:
        assert token not in answer.message
    if refusal is Forbidden:
        assert "scope" in answer.message and "'" in answer.message


def test_single_tokens_keep_their_rules_beside_the_file(tmp_path: Path) -> None:
    """--api-token and --admin-token work as before beside a token file; with a file, no
    token at all is 401 everywhere under /v1."""
    policy = _policy(tmp_path, api="api", admin="adm")
    assert policy.check("POST", "/v1/ledgers/9/entries", b"", b"api") is None
    assert policy.check("POST", "/v1/admin/audit", b"", b"adm") is None
    assert isinstance(policy.check("GET", "/v1/admin/cluster", b"", b"api"), Unauthorized)
    assert policy.check("GET", "/v1/admin/cluster", b"", READER.encode()) is None
    open_file = _policy(tmp_path)
    assert isinstance(open_file.check("GET", "/v1/admin/cluster", b"", None), Unauthorized)
    assert TokenPolicy(None, None).check("GET", "/v1/admin/cluster", b"", None) is None


def test_middleware_answers_401_and_403_with_the_error_body(tmp_path: Path) -> None:
    """The middleware answers a refused call itself: 401 with the Bearer challenge, 403
    forbidden with insufficient_scope, both {"error", "message"}."""
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/v1/logs/{name}/records")
    async def append(name: str) -> dict:
        return {"name": name}

    app.add_middleware(TokenMiddleware, policy=_policy(tmp_path))
    client = TestClient(app)
    auth = {"Authorization": f"Bearer {WRITER}"}
    assert client.post("/v1/logs/orders-eu/records", headers=auth).json() == {"name": "orders-eu"}
    r = client.post("/v1/logs/billing/records", headers=auth)
    assert r.status_code == 403 and r.json()["error"] == "forbidden"
    assert r.json()["message"] == (
        "the token 'orders-writer' (scope write) lacks the write scope on log 'billing'"
    )
    assert r.headers["www-authenticate"] == 'Bearer error="insufficient_scope"'
    r = client.post("/v1/logs/billing/records", headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401 and r.json()["error"] == "unauthorized"
    assert r.headers["www-authenticate"] == "Bearer"


def test_token_file_reload_keeps_the_old_tokens_on_a_bad_version(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A reload takes a good new version at once; a bad one keeps the tokens in force,
    logs one line without any token, and is not tried again until it changes."""
    path = tmp_path / "tokens.toml"
    path.write_text(FILE)
    tokens = TokenFile(path)
    policy = TokenPolicy(None, None, tokens)
    assert not tokens.changed()
    new = "new-token-6a1f"
    path.write_text(FILE.replace(token_digest(WRITER), token_digest(new)))
    assert tokens.changed() and tokens.reload()
    assert policy.check("POST", "/v1/logs/orders-eu/records", b"", new.encode()) is None
    assert isinstance(
        policy.check("POST", "/v1/logs/orders-eu/records", b"", WRITER.encode()), Unauthorized
    )
    with caplog.at_level(logging.INFO, logger="gateway.http.token_file"):
        path.write_text("[[token]]\nname = 'x'\ntoken = 'PLAINSECRET'\n")
        os.utime(path, ns=(1, 1))
        assert tokens.changed() and not tokens.reload()
    assert not tokens.changed()  # that version failed once: not again
    assert policy.check("POST", "/v1/logs/orders-eu/records", b"", new.encode()) is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "not reloaded" in lines[0] and "4 tokens in force" in lines[0]
    assert "PLAINSECRET" not in lines[0] and new not in lines[0]
    path.unlink()
    assert tokens.changed() and not tokens.reload()
    with pytest.raises(TokenFileError, match="cannot read"):
        TokenFile(path)
