"""Token checks for the gateway's ``/v1/`` API, done before routing.

docs/api.md: the token is checked first, so an unknown ``/v1`` route without a
required token is 401, not 404. ``--api-token`` guards every ``/v1/`` call;
``--admin-token`` guards ``/v1/admin/`` (the API token is not enough there)
and is also accepted everywhere the API token is. ``/health``, ``/metrics``,
``/openapi.json``, ``/docs`` and the admin page are public.

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

from starlette.types import ASGIApp, Receive, Scope, Send

from services.errors import Unauthorized
from services.web.errors import error_json

_ADMIN_PREFIX = "/v1/admin"
# Scope keys of a /v1 WebSocket connection: whether its headers' token is good, and how
# to check a token it sends in a message.
_WS_AUTHORIZED = "quire.authorized"
_WS_TOKEN_CHECK = "quire.token_check"
# RFC 6750: a 401 names the scheme the client should use.
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def _matches(given: bytes | None, expected: bytes | None) -> bool:
    return given is not None and expected is not None and hmac.compare_digest(given, expected)


def _is_admin(path: str) -> bool:
    return path == _ADMIN_PREFIX or path.startswith(_ADMIN_PREFIX + "/")


def token_required(path: str, api_token: str | None, admin_token: str | None) -> bool:
    """Whether a ``/v1`` call on ``path`` is refused without a token (for the OpenAPI
    document's security requirements)."""
    return api_token is not None or (admin_token is not None and _is_admin(path))


def websocket_authorization(scope: Scope) -> tuple[bool, Callable[[str], bool]]:
    """(whether the WebSocket connection's headers carry a good token or none is needed,
    a check of a token sent in a message) as the middleware left them; (False, a check
    that refuses everything) when it did not see the connection."""
    check = scope.get(_WS_TOKEN_CHECK)
    if not callable(check):
        return False, lambda token: False
    return bool(scope.get(_WS_AUTHORIZED)), check


def _bearer(scope: Scope) -> bytes | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            if value[:7].lower() == b"bearer ":
                return bytes(value[7:].strip())
            return None
    return None


class TokenPolicy:
    """Which token a ``/v1`` call needs (the module docstring)."""

    def __init__(self, api_token: str | None, admin_token: str | None) -> None:
        self.api_token = api_token.encode() if api_token else None
        self.admin_token = admin_token.encode() if admin_token else None

    def allowed(self, path: str, token: bytes | None) -> bool:
        if _is_admin(path):
            if self.admin_token is not None:
                return _matches(token, self.admin_token)
            return self.api_token is None or _matches(token, self.api_token)
        if self.api_token is None:
            return True
        return _matches(token, self.api_token) or _matches(token, self.admin_token)

    def allows(self, scope: Scope) -> bool:
        """Whether an HTTP call's bearer token is good for its path."""
        return self.allowed(scope["path"], _bearer(scope))


class TokenMiddleware:
    def __init__(self, app: ASGIApp, policy: TokenPolicy) -> None:
        self.app = app
        self.allowed = policy.allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not (
            scope["path"] == "/v1" or scope["path"].startswith("/v1/")
        ):
            await self.app(scope, receive, send)
            return
        token = _bearer(scope)
        if scope["type"] == "websocket":
            path = scope["path"]

            def check(given: str) -> bool:
                return self.allowed(path, given.encode("utf-8", "surrogateescape"))

            scope = {**scope, _WS_AUTHORIZED: self.allowed(path, token), _WS_TOKEN_CHECK: check}
            await self.app(scope, receive, send)
            return
        if self.allowed(scope["path"], token):
            await self.app(scope, receive, send)
            return
        refusal = Unauthorized("missing or wrong bearer token")
        await error_json(refusal, headers=_CHALLENGE)(scope, receive, send)
