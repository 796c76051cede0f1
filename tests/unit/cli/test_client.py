"""services/cli/client.py: API error answers map back to their error class, every
class has its exit code, and an error is reported as one stderr line."""

from __future__ import annotations

import httpx
import pytest
import typer

from services.cli.client import (
    EXIT_CODES,
    GatewayClient,
    GatewayUnreachable,
    api_error,
    exit_code_for,
    reported,
)
from services.errors import (
    LedgerClosed,
    LedgerFenced,
    LedgerNotFound,
    NotEnoughBookies,
    QuireError,
    QuorumTimeout,
    Unauthorized,
)


def _response(status: int, body: bytes, content_type: str = "application/json") -> httpx.Response:
    request = httpx.Request("GET", "http://gw.example:8080/v1/ledgers/7")
    return httpx.Response(status, content=body, headers={"content-type": content_type},
                          request=request)  # fmt: skip


def test_api_error_maps_the_code_to_its_class_with_the_message() -> None:
    """`{"error", "message"}` becomes the class of that code, carrying the message."""
    exc = api_error(_response(404, b'{"error": "ledger_not_found", "message": "no ledger 7"}'))
    assert isinstance(exc, LedgerNotFound) and exc.message == "no ledger 7"
    assert isinstance(api_error(_response(409, b'{"error": "ledger_fenced", "message": "m"}')),
                      LedgerFenced)  # fmt: skip


def test_api_error_keeps_an_unknown_code_and_names_a_non_api_answer() -> None:
    """An unknown code stays visible; an answer that is not an API error names status
    and URL."""
    unknown = api_error(_response(418, b'{"error": "teapot", "message": "short and stout"}'))
    assert type(unknown) is QuireError and "teapot" in unknown.message
    html = api_error(_response(502, b"<html>bad gateway</html>", "text/html"))
    assert type(html) is QuireError
    assert "502" in html.message and "gw.example" in html.message


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (GatewayUnreachable("x"), 3),
        (Unauthorized("x"), 5),
        (LedgerNotFound("x"), 6),
        (LedgerClosed("x"), 7),
        (NotEnoughBookies("x"), 9),
        (QuorumTimeout("x"), 10),
        (QuireError("x"), 1),
    ],
)
def test_exit_code_per_error_class(exc: QuireError, code: int) -> None:
    """Each class of error has its own exit code; anything else is 1."""
    assert exit_code_for(exc) == code


def test_exit_codes_are_distinct_and_not_usage() -> None:
    """No two classes share an exit code, and none is 0, 1 or click's 2."""
    codes = [code for _, code in EXIT_CODES]
    assert len(set(codes)) == len(codes) and not {0, 1, 2} & set(codes)


def test_reported_prints_one_line_and_exits(capsys: pytest.CaptureFixture[str]) -> None:
    """A QuireError inside `reported()` becomes `quire: error: CODE: MESSAGE` and an
    exit with its code."""
    with pytest.raises(typer.Exit) as exit_info, reported():
        raise LedgerNotFound("no ledger 7")
    assert exit_info.value.exit_code == 6
    assert capsys.readouterr().err.strip() == "quire: error: ledger_not_found: no ledger 7"


def test_transport_error_names_the_url_and_never_the_secrets() -> None:
    """A refused connection is GatewayUnreachable naming the URL; neither the token nor
    the password appears in the message."""

    def refuse(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == "Bearer tok-secret"
        assert request.headers["x-ledger-password"] == "pw-secret"
        raise httpx.ConnectError("Connection refused", request=request)

    client = GatewayClient(
        "http://127.0.0.1:1/", "tok-secret", "pw-secret", transport=httpx.MockTransport(refuse)
    )
    with client, pytest.raises(GatewayUnreachable) as info:
        client.request("GET", "/v1/ledgers/1/entries", password=True)
    assert "http://127.0.0.1:1" in info.value.message
    assert "secret" not in info.value.message


def test_password_header_only_when_asked() -> None:
    """The ledger password goes only on calls that need it (never on show or list)."""
    seen: list[httpx.Headers] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers)
        return httpx.Response(200, json={"ledgers": [], "next": None})

    client = GatewayClient("http://gw", None, "pw", transport=httpx.MockTransport(answer))
    with client:
        client.json("GET", "/v1/ledgers")
        client.json("GET", "/v1/ledgers/1/lac", password=True)
    assert "x-ledger-password" not in seen[0] and seen[1]["x-ledger-password"] == "pw"
    assert "authorization" not in seen[0]
