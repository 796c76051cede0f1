"""The admin web page (docs/api.md: ``GET /admin``): one HTML page, its script and its style,
shipped in the package (``gateway/admin/static/``), no build step. The page is public;
its data calls go to the Admin API with the token the page asks for (admin.js)."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, Request
from fastapi.responses import Response

from services.errors import NotFound
from services.web.errors import error_responses, explained

router = APIRouter(tags=["admin page"])

_ASSETS = {
    "admin.js": "text/javascript",
    "admin.css": "text/css",
    "favicon.svg": "image/svg+xml",
}
# The page and its assets change only with the package: cached briefly, revalidated.
_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    # Only our own script, style and API calls; no framing by other sites.
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
}


def _read(name: str) -> bytes:
    return resources.files("gateway.admin.static").joinpath(name).read_bytes()


@router.get(
    "/admin",
    response_class=Response,
    summary="The admin web page (cluster, bookies, ledgers, logs, under-replication), live",
    responses={200: {"content": {"text/html": {"schema": {"type": "string"}}}}},
)
async def admin_page(request: Request) -> Response:
    page = _read("index.html")
    if getattr(request.app.state, "token_required", False):
        # The page asks for the token at once instead of making a call bound to be 401.
        page = page.replace(b'data-token="optional"', b'data-token="required"', 1)
    return Response(page, media_type="text/html; charset=utf-8", headers=_HEADERS)


@router.get(
    "/admin/assets/{name}",
    response_class=Response,
    summary="The admin page's script and style",
    responses={
        200: {"content": {kind: {"schema": {"type": "string"}} for kind in _ASSETS.values()}},
        **error_responses(explained(NotFound, "no such asset")),
    },
)
async def admin_asset(name: str) -> Response:
    media_type = _ASSETS.get(name)
    if media_type is None:
        raise NotFound(f"no admin page asset {name!r}")
    return Response(_read(name), media_type=f"{media_type}; charset=utf-8", headers=_HEADERS)
