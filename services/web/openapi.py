"""Our post-processing of every service's OpenAPI document."""

from __future__ import annotations

from typing import Any

from fastapi.openapi.utils import get_openapi

from services.web.app import QuireApp


def install_openapi(app: QuireApp, scheme_name: str, scheme: dict[str, Any]) -> None:
    """Build the app's OpenAPI document our way: ``scheme`` as the security scheme of
    every /v1 operation, and no FastAPI 422 responses (validation errors are 400)."""

    def build() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        doc = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
            tags=app.openapi_tags,
        )
        doc.setdefault("components", {}).setdefault("securitySchemes", {})[scheme_name] = scheme
        for path, operations in doc.get("paths", {}).items():
            for operation in operations.values():
                operation.get("responses", {}).pop("422", None)
                if path.startswith("/v1"):
                    operation["security"] = [{scheme_name: []}]
        schemas = doc.get("components", {}).get("schemas", {})
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
        app.openapi_schema = doc
        return doc

    app.openapi_builder = build
