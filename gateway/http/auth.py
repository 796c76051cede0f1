"""Token checks for the gateway's ``/v1/`` API, done before routing.

docs/api.md: the token is checked first, so an unknown ``/v1`` route without a
required token is 401, not 404. ``--api-token`` guards every ``/v1/`` call;
``--admin-token`` guards ``/v1/admin/`` (the API token is not enough there)
and is also accepted everywhere the API token is. ``/health``, ``/metrics``,
``/openapi.json``, ``/docs`` and the admin page are public.

``--token-file`` adds scoped tokens beside those two (gateway/http/scopes.py): with it
every ``/v1/`` call needs a token. A token neither single token nor the file knows is
401 ``unauthorized``; a token of the file whose scope does not allow the call is 403
``forbidden``, the message naming the token's name and the scope it lacks, never the
token. The single tokens keep their rules (the API token on ``/v1/admin/`` with an
admin token set is still 401).

WebSocket connections to ``/v1/`` (streaming appends, gateway/streams/session.py) need the same
tokens. A browser cannot set headers on a WebSocket, so the token may come either in
the ``Authorization`` header or in the client's first message (never in the URL, which
ends up in logs): the middleware cannot refuse an upgrade for a token still to come, so
it passes the connection on with its verdict on the headers and a checker for a token
sent later (``websocket_authorization``); a WebSocket route must not accept a record
until one of the two said yes. A WebSocket connection that did not go through the
middleware is refused (no checker: no token is ever good).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.http.scopes import required_access
from gateway.http.token_file import TokenFile
from services.errors import Forbidden, QuireError, Unauthorized
from services.web.errors import error_json, error_responses, explained

_ADMIN_PREFIX = "/v1/admin"
# Scope keys of a /v1 WebSocket connection: the refusal of its headers' token (None: it
# is good, or none is needed), and how to check a token it sends in a message.
_WS_REFUSAL = "quire.refusal"
_WS_TOKEN_CHECK = "quire.token_check"
# RFC 6750: a 401 names the scheme the client should use; a 403 says the scope is short.
_CHALLENGE = {"WWW-Authenticate": "Bearer"}
_SHORT_SCOPE = {"WWW-Authenticate": 'Bearer error="insufficient_scope"'}
_UNKNOWN = "missing or wrong bearer token"

TokenCheck = Callable[[str], QuireError | None]


def _matches(given: bytes | None, expected: bytes | None) -> bool:
    return given is not None and expected is not None and hmac.compare_digest(given, expected)


def _is_admin(path: str) -> bool:
    return path == _ADMIN_PREFIX or path.startswith(_ADMIN_PREFIX + "/")


def token_required(
    path: str, api_token: str | None, admin_token: str | None, token_file: bool = False
) -> bool:
    """Whether a ``/v1`` call on ``path`` is refused without a token (for the OpenAPI
    document's security requirements)."""
    return token_file or api_token is not None or (admin_token is not None and _is_admin(path))


FORBIDDEN = explained(
    Forbidden, "the token is known but its scope does not cover the call (--token-file)"
)


def document_forbidden(doc: dict[str, Any]) -> None:
    """Add the 403 ``forbidden`` answer to every ``/v1`` operation of the OpenAPI
    document: any of them may meet a scoped token that does not cover it."""
    answer = error_responses(FORBIDDEN)[Forbidden.http_status]
    for path, operations in doc.get("paths", {}).items():
        if path.startswith("/v1"):
            for operation in operations.values():
                operation.setdefault("responses", {})[str(Forbidden.http_status)] = answer


def _refuse_all(token: str) -> QuireError | None:
    return Unauthorized(_UNKNOWN)


def websocket_authorization(scope: Scope) -> tuple[QuireError | None, TokenCheck]:
    """(the refusal of the WebSocket connection's headers, None when their token is good
    or none is needed; a check of a token sent in a message, None when it is good) as the
    middleware left them; (401, a check that refuses everything) when it did not see the
    connection."""
    check = scope.get(_WS_TOKEN_CHECK)
    if not callable(check):
        return Unauthorized(_UNKNOWN), _refuse_all
    refusal = scope.get(_WS_REFUSAL)
    return (refusal if isinstance(refusal, QuireError) else None), check


def _bearer(scope: Scope) -> bytes | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            if value[:7].lower() == b"bearer ":
                return bytes(value[7:].strip())
            return None
    return None


class TokenPolicy:
    """Which token a ``/v1`` call needs (the module docstring): the single tokens, then
    the token file's, whose table is read at each call (a reload swaps it)."""

    def __init__(
        self, api_token: str | None, admin_token: str | None, token_file: TokenFile | None = None
    ) -> None:
        self.api_token = api_token.encode() if api_token else None
        self.admin_token = admin_token.encode() if admin_token else None
        self.token_file = token_file

    def _single_tokens_allow(self, path: str, token: bytes | None) -> bool:
        """The rules of ``--api-token`` and ``--admin-token``; with no token of any kind
        configured (no file either) the API is open."""
        open_api = self.api_token is None and self.token_file is None
        if _is_admin(path):
            if self.admin_token is not None:
                return _matches(token, self.admin_token)
            return open_api or _matches(token, self.api_token)
        if open_api:
            return True
        return _matches(token, self.api_token) or _matches(token, self.admin_token)

    def check(
        self, method: str, path: str, query: bytes, token: bytes | None, websocket: bool = False
    ) -> QuireError | None:
        """None when the call may go on, else its refusal: 401 for a missing or unknown
        token, 403 for a token of the file whose scope does not allow the call."""
        if self._single_tokens_allow(path, token):
            return None
        entry = None
        if self.token_file is not None and token is not None:
            entry = self.token_file.table.lookup(token)
        if entry is None:
            return Unauthorized(_UNKNOWN)
        access = required_access(method, path, query, websocket)
        if entry.grants(access):
            return None
        return Forbidden(
            f"the token {entry.name!r} (scope {entry.scope.label}) lacks {access.describe()}"
        )

    def allows(self, scope: Scope) -> bool:
        """Whether an HTTP call's bearer token is good for it."""
        return (
            self.check(scope["method"], scope["path"], scope["query_string"], _bearer(scope))
            is None
        )


class TokenMiddleware:
    def __init__(self, app: ASGIApp, policy: TokenPolicy) -> None:
        self.app = app
        self.check = policy.check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not (
            scope["path"] == "/v1" or scope["path"].startswith("/v1/")
        ):
            await self.app(scope, receive, send)
            return
        token = _bearer(scope)
        path, query = scope["path"], scope["query_string"]
        if scope["type"] == "websocket":

            def check(given: str) -> QuireError | None:
                return self.check(
                    "GET", path, query, given.encode("utf-8", "surrogateescape"), True
                )

            refusal = self.check("GET", path, query, token, True)
            scope = {**scope, _WS_REFUSAL: refusal, _WS_TOKEN_CHECK: check}
            await self.app(scope, receive, send)
            return
        refusal = self.check(scope["method"], path, query, token)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        challenge = _SHORT_SCOPE if isinstance(refusal, Forbidden) else _CHALLENGE
        await error_json(refusal, headers=challenge)(scope, receive, send)
