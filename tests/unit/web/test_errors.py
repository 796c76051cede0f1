"""Error answers are built by one function, services.web.errors.error_body: the
gateway's token 401 (raw ASGI, before routing), /health's 503 and every error a route
raises carry its bytes, with the status and headers they always had. Their OpenAPI
descriptions are built by one function too, error_responses, from the error classes."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from gateway.http.auth import TokenMiddleware, TokenPolicy
from services.errors import (
    InvalidArgument,
    InvariantViolation,
    LedgerFenced,
    LedgerNotFound,
    NotWriter,
    QuireError,
    Unauthorized,
    Unavailable,
)
from services.web import errors as web_errors
from services.web.app import QuireApp, new_app
from services.web.errors import (
    ERROR_SCHEMA_REF,
    DocumentedError,
    error_body,
    error_json,
    error_responses,
    explained,
    install_error_handlers,
    noted,
)
from services.web.routes import add_health_route

# The bodies as FastAPI's JSONResponse renders them: /health's 503 is byte for byte what
# it was; the token 401 used json.dumps' default separators before (two spaces more), and
# now is compact like every other error answer (same status, code, message, headers).
UNAUTHORIZED_401 = b'{"error":"unauthorized","message":"missing or wrong bearer token"}'
NOT_READY_503 = b'{"error":"unavailable","message":"not ready"}'


def _app(ready: bool = False) -> QuireApp:
    app = new_app()
    install_error_handlers(app)
    add_health_route(app, lambda: ready)

    @app.get("/v1/ledgers/{ledger_id}")
    async def ledger(ledger_id: int) -> dict[str, int]:
        raise LedgerNotFound(f"no ledger {ledger_id}")

    app.add_middleware(TokenMiddleware, policy=TokenPolicy("api", None))
    return app


def test_error_body_is_compact_utf8_json() -> None:
    """error_body is {"error": CODE, "message": TEXT} as compact UTF-8 JSON (non-ASCII
    kept as is), and error_json answers it with the error's status."""
    assert error_body(Unauthorized("missing or wrong bearer token")) == UNAUTHORIZED_401
    assert error_body(InvalidArgument("bad é")) == (
        '{"error":"invalid_argument","message":"bad é"}'.encode()
    )
    response = error_json(Unavailable("not ready"))
    assert response.status_code == 503 and response.body == NOT_READY_503
    assert response.headers["content-type"] == "application/json"


def test_token_401_and_health_503_keep_their_answers() -> None:
    """The token middleware's 401 and /health's 503 keep their status, code, message and
    headers (WWW-Authenticate: Bearer on the 401) now that they share error_body."""
    client = TestClient(_app())
    r = client.get("/v1/ledgers/7")
    assert r.status_code == 401
    assert r.content == UNAUTHORIZED_401
    assert r.headers["content-type"] == "application/json"
    assert r.headers["www-authenticate"] == "Bearer"
    assert r.headers["content-length"] == str(len(UNAUTHORIZED_401))

    r = client.get("/health")
    assert r.status_code == 503
    assert r.content == NOT_READY_503
    assert r.headers["content-type"] == "application/json"
    assert "www-authenticate" not in r.headers

    assert TestClient(_app(ready=True)).get("/health").json() == {"status": "ok"}


def test_every_error_answer_goes_through_error_body(monkeypatch: pytest.MonkeyPatch) -> None:
    """With error_body replaced, the 401 before routing, the 503 of /health, an error a
    route raises and an unknown route all answer with the replacement's bytes."""
    seen: list[str] = []

    def marked(exc: QuireError) -> bytes:
        seen.append(exc.code)
        return b'{"marked":"%s"}' % exc.code.encode()

    monkeypatch.setattr(web_errors, "error_body", marked)
    client = TestClient(_app())
    assert client.get("/v1/ledgers/7").content == b'{"marked":"unauthorized"}'
    assert client.get("/health").content == b'{"marked":"unavailable"}'
    auth = {"Authorization": "Bearer api"}
    r = client.get("/v1/ledgers/7", headers=auth)
    assert r.status_code == 404 and r.content == b'{"marked":"ledger_not_found"}'
    assert client.get("/v1/ledgers/x", headers=auth).content == b'{"marked":"invalid_argument"}'
    assert client.get("/nope").content == b'{"marked":"not_found"}'
    assert seen == ["unauthorized", "unavailable", "ledger_not_found", "invalid_argument",
                    "not_found"]  # fmt: skip


def test_error_responses_group_the_classes_by_their_status() -> None:
    """error_responses documents a route's errors from their classes (docs/style.md §3):
    one response per HTTP status the classes have, its description their codes (or notes)
    in the order given, its body the Error schema."""
    responses = error_responses(
        InvalidArgument,
        noted(LedgerFenced, "outcome unknown"),
        NotWriter,
        explained(LedgerNotFound, "the ledger is unknown here"),
    )
    assert {status: r["description"] for status, r in responses.items()} == {
        400: "invalid_argument",
        409: "ledger_fenced (outcome unknown) / not_writer",
        404: "ledger_not_found: the ledger is unknown here",
    }
    for r in responses.values():
        assert r["content"] == {"application/json": {"schema": ERROR_SCHEMA_REF}}


def test_a_description_names_no_other_class_code() -> None:
    """A route's words for an error cannot name another error's code, which would list it
    under the wrong status."""
    assert DocumentedError(Unavailable, "not ready").text == "not ready"
    with pytest.raises(InvariantViolation, match="entry_not_found"):
        noted(LedgerNotFound, "or entry_not_found")
