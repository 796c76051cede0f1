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
        schemas = doc.setdefault("components", {}).setdefault("schemas", {})
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
        hoist_defs(doc)
        name_inline_models(doc)
        ids = [op.get("operationId") for ops in doc["paths"].values() for op in ops.values()]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"operation ids used twice: {twice} (rename the route functions)")
        app.openapi_schema = doc
        return doc

    app.openapi_builder = build


def hoist_defs(doc: dict[str, Any]) -> None:
    """Move the ``$defs`` of schemas written inline (a pydantic model's own JSON schema in
    a route's ``responses``) into ``components/schemas`` and point their ``#/$defs/X``
    references there: in an OpenAPI document ``#/`` is the document's root, so left in
    place those references resolve to nothing (generators and validators refuse them)."""
    schemas: dict[str, Any] = doc["components"]["schemas"]
    found: dict[str, Any] = {}

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        out = {}
        for key, value in node.items():
            if key == "$defs" and isinstance(value, dict):
                for name, schema in value.items():
                    found[name] = walk(schema)
                continue
            if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/"):
                value = "#/components/schemas/" + value.removeprefix("#/$defs/")
            out[key] = walk(value)
        return out

    doc["paths"] = walk(doc.get("paths", {}))
    for name, schema in found.items():
        schemas.setdefault(name, schema)  # pydantic names a model the same everywhere
    doc["components"] = _integral_bounds(doc["components"])


def name_inline_models(doc: dict[str, Any]) -> None:
    """Request and answer bodies written inline (routes whose body the code reads itself)
    become named components when they carry a title (a pydantic model's name), so
    generated clients call them ``CreateLedger``, not ``CreateLedgerCreateLedger``. A
    title already taken by another schema stays inline."""
    schemas: dict[str, Any] = doc["components"]["schemas"]

    def named(schema: Any) -> Any:
        if not isinstance(schema, dict):
            return schema
        for key in ("oneOf", "anyOf"):
            if key in schema:
                schema = {**schema, key: [named(s) for s in schema[key]]}
        title = schema.get("title")
        if not title or schema.get("type") != "object" or "properties" not in schema:
            return schema
        if schemas.setdefault(title, schema) != schema:
            return schema
        return {"$ref": f"#/components/schemas/{title}"}

    for operations in doc.get("paths", {}).values():
        for operation in operations.values():
            bodies = [operation.get("requestBody", {})]
            bodies += list(operation.get("responses", {}).values())
            for body in bodies:
                for media in body.get("content", {}).values():
                    if "schema" in media:
                        media["schema"] = named(media["schema"])


_BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_INT64_MAX = 2**63 - 1


def _integral_bounds(node: Any) -> Any:
    """FastAPI's OpenAPI model keeps numeric bounds as floats: ``le=2**63-1`` comes out
    as 9.223372036854776e+18 (which is 2**63). Integral bounds go back to integers, the
    64-bit id bound exactly, so clients and validators see the real limits."""
    if isinstance(node, list):
        return [_integral_bounds(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in _BOUNDS and isinstance(value, float) and value.is_integer():
            value = _INT64_MAX if value == float(_INT64_MAX) else int(value)
        out[key] = _integral_bounds(value)
    return out
