"""Our post-processing of every service's OpenAPI document."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fastapi.openapi.utils import get_openapi

from services.errors import invariant
from services.limits import ID_MAX
from services.web.app import QuireApp
from services.web.errors import ERROR_SCHEMA, ERROR_SCHEMA_NAME


def install_openapi(
    app: QuireApp,
    scheme_name: str,
    scheme: dict[str, Any],
    required: Callable[[str], bool] = lambda path: False,
    links: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    finish: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    """Build the app's OpenAPI document our way: ``scheme`` as the security scheme of
    every /v1 operation, the one ``Error`` body every error response refers to, and no
    FastAPI 422 responses (validation errors are 400).

    The credential is a security requirement, never a header parameter: required on the
    paths where ``required(path)`` says this service (as configured) refuses a call
    without it, optional elsewhere (``[{scheme: []}, {}]``: with or without it), so that
    generated clients and fuzzers send it exactly when it is needed. The exported
    documents are built with default settings, where nothing is required.

    ``links`` (operation id -> answer status -> OpenAPI links) are added to those
    answers; every operation they name must exist."""

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
        components = doc.setdefault("components", {})
        components.setdefault("securitySchemes", {})[scheme_name] = scheme
        schemas = components.setdefault("schemas", {})
        schemas[ERROR_SCHEMA_NAME] = ERROR_SCHEMA
        for path, operations in doc.get("paths", {}).items():
            for operation in operations.values():
                operation.get("responses", {}).pop("422", None)
                if path.startswith("/v1"):
                    needed: list[dict[str, list[str]]] = [{scheme_name: []}]
                    operation["security"] = needed if required(path) else [*needed, {}]
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
        exact_bounds(doc)
        plain_optional_headers(doc)
        hoist_definitions(doc, schemas)
        name_inline_models(doc)
        ids = [op.get("operationId") for ops in doc["paths"].values() for op in ops.values()]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        invariant(not twice, f"operation ids used twice: {twice} (rename the route functions)")
        add_links(doc, links or {})
        if finish is not None:  # the service's own additions (the gateway's examples)
            finish(doc)
        app.openapi_schema = doc
        return doc

    app.openapi_builder = build


def add_links(doc: dict[str, Any], links: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> None:
    """Put each answer's links on it (``install_openapi``)."""
    by_id = {
        op["operationId"]: op
        for ops in doc["paths"].values()
        for op in ops.values()
        if isinstance(op, dict) and "operationId" in op
    }
    for operation_id, answers in links.items():
        invariant(operation_id in by_id, f"links of an unknown operation {operation_id}")
        for status, named in answers.items():
            response = by_id[operation_id]["responses"].get(status)
            invariant(response is not None, f"links of an undocumented {operation_id} {status}")
            for link in named.values():
                target = link["operationId"]
                invariant(target in by_id, f"a link to an unknown operation {target}")
            response["links"] = {name: dict(link) for name, link in named.items()}


def plain_optional_headers(doc: dict[str, Any]) -> None:
    """Document each optional header as the string it is. FastAPI writes a ``str | None``
    header as "a string or null", and a header cannot be null: clients and fuzzers sent
    the null alternative as the text "null" (a fuzz run found ``Expected-Last-Position:
    null`` refused). An absent header is absent."""
    for item in doc.get("paths", {}).values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                if parameter.get("in") != "header":
                    continue
                schema = parameter.get("schema", {})
                kinds = schema.get("anyOf")
                if kinds and any(kind.get("type") == "null" for kind in kinds):
                    del schema["anyOf"]
                    for kind in kinds:
                        if kind.get("type") != "null":
                            schema.update(kind)


_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def exact_bounds(node: Any) -> None:
    """Write the numeric bounds of every schema as the integers they are. FastAPI's model
    of a document holds them as floats, so ``le=ID_MAX`` came out as 2^63 (one more than
    any id) and ``ge=0`` as ``0.0``; the only bound that large is ``ID_MAX``."""
    if isinstance(node, list):
        for item in node:
            exact_bounds(item)
        return
    if not isinstance(node, dict):
        return
    for key in _BOUNDS:
        value = node.get(key)
        if isinstance(value, float) and value.is_integer():
            node[key] = ID_MAX if value == float(ID_MAX) else int(value)
    for value in node.values():
        exact_bounds(value)


_DEFS_REF = "#/$defs/"
_COMPONENT_REF = "#/components/schemas/"


def hoist_definitions(node: Any, schemas: dict[str, Any]) -> None:
    """Move the ``$defs`` of schemas written inline (``Model.model_json_schema()`` in a
    route's ``openapi_extra`` or ``responses``) into ``components/schemas`` and point their
    references there: in an OpenAPI document ``#/$defs/...`` would name the document's
    root, where there is nothing."""
    if isinstance(node, list):
        for item in node:
            hoist_definitions(item, schemas)
        return
    if not isinstance(node, dict):
        return
    for name, schema in node.pop("$defs", {}).items():
        hoist_definitions(schema, schemas)
        invariant(
            schemas.setdefault(name, schema) == schema,
            f"two different schemas are both named {name} in the OpenAPI document",
        )
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_DEFS_REF):
        node["$ref"] = _COMPONENT_REF + ref.removeprefix(_DEFS_REF)
    for value in node.values():
        hoist_definitions(value, schemas)


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
        return {"$ref": f"{_COMPONENT_REF}{title}"}

    for operations in doc.get("paths", {}).values():
        for operation in operations.values():
            bodies = [operation.get("requestBody", {})]
            bodies += list(operation.get("responses", {}).values())
            for body in bodies:
                for media in body.get("content", {}).values():
                    if "schema" in media:
                        media["schema"] = named(media["schema"])
