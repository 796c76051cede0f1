"""The admin web page (API.md: ``GET /admin``): one HTML page, its script and its style,
shipped in the package (``gateway/admin_page/``), no build step. The page is public;
its data calls go to the Admin API with the token the page asks for (admin.js)."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import Response

from services.errors import NotFound
from services.web.errors import error_response

router = APIRouter(tags=["admin page"])

_ASSETS = {"admin.js": "text/javascript", "admin.css": "text/css"}
# The page and its assets change only with the package: cached briefly, revalidated.
_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    # Only our own script, style and API calls; no framing by other sites.
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
}


def _read(name: str) -> bytes:
    return resources.files("gateway.admin_page").joinpath(name).read_bytes()


@router.get(
    "/admin",
    response_class=Response,
    summary="The admin web page (cluster, bookies, ledgers, logs, under-replication), live",
    responses={200: {"content": {"text/html": {"schema": {"type": "string"}}}}},
)
async def admin_page() -> Response:
    return Response(_read("index.html"), media_type="text/html; charset=utf-8", headers=_HEADERS)


@router.get(
    "/admin/assets/{name}",
    response_class=Response,
    summary="The admin page's script and style",
    responses={
        200: {
            "content": {
                "text/javascript": {"schema": {"type": "string"}},
                "text/css": {"schema": {"type": "string"}},
            }
        },
        **error_response(404, "not_found: no such asset"),
    },
)
async def admin_asset(name: str) -> Response:
    media_type = _ASSETS.get(name)
    if media_type is None:
        raise NotFound(f"no admin page asset {name!r}")
    return Response(_read(name), media_type=f"{media_type}; charset=utf-8", headers=_HEADERS)
