"""HTTP method details every service gets from its server: ``HEAD`` and ``Allow``.

FastAPI routes list only the methods they were declared with, so ``HEAD`` of a GET
route was 405, and a 405 said nothing of what is allowed. ``MethodsMiddleware`` wraps
the whole application (outside every other middleware, so a token or secret is still
checked first):

- ``HEAD`` on a path that has a GET route runs that GET; the server (uvicorn, whose own
  request scope still says HEAD) sends its status and headers without the body;
- a 405 answer carries ``Allow`` with every method of every route of that path.
"""

from __future__ import annotations

from typing import Any

from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# The methods a path is probed with to learn what it allows.
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def accepts(routes: list[Any], path: str, method: str) -> bool:
    """Whether some route of ``routes`` serves ``method`` on ``path``. Asks each route's
    own ``matches`` (FastAPI's included routers hide their routes)."""
    scope = {"type": "http", "path": path, "root_path": "", "method": method}
    return any(route.matches(scope)[0] == Match.FULL for route in routes)


def allowed_methods(routes: list[Any], path: str) -> set[str]:
    """Every method some route of ``routes`` serves on ``path`` (HEAD wherever GET).
    About a millisecond: done only for a 405."""
    methods = {method for method in _METHODS if accepts(routes, path, method)}
    if "GET" in methods:
        methods.add("HEAD")
    return methods


class MethodsMiddleware:
    """``HEAD`` of GET routes and ``Allow`` on 405 (see the module docstring)."""

    def __init__(self, app: ASGIApp, routes: list[Any]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if scope["method"] == "HEAD" and accepts(self.routes, path, "GET"):
            scope = dict(scope)
            scope["method"] = "GET"

        async def send_with_allow(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 405:
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"allow" for name, _ in headers):
                    allow = ", ".join(sorted(allowed_methods(self.routes, path)))
                    headers.append((b"allow", allow.encode()))
                    message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_allow)
