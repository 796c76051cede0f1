"""The exported OpenAPI documents are current and describe every error response."""

from __future__ import annotations

from typing import Any

import pytest

from services.web.openapi_export import EXPORTS, Exported, available_exports, render

# Operations that cannot fail for a caller's reason; everything else must document errors.
NO_ERRORS = {("get", "/metrics"), ("get", "/admin")}
# Operations whose input cannot be refused: any admin page asset name is a 404 at worst.
NO_BAD_INPUT = {("get", "/admin/assets/{name}")}
HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}


@pytest.fixture(scope="module", params=available_exports() or [None], ids=lambda e: e and e.name)
def exported(request: pytest.FixtureRequest) -> tuple[Exported, dict[str, Any]]:
    if request.param is None:
        pytest.skip("no service app exists yet")
    export: Exported = request.param
    return export, export.document()


def test_bookie_document_is_exported() -> None:
    """The bookie's document is exported as soon as bookie.app exists."""
    bookie = next(e for e in EXPORTS if e.name == "bookie")
    if not bookie.available():
        pytest.skip("bookie.app does not exist yet")
    assert bookie.path.exists(), f"{bookie.path} is missing: run 'make openapi'"


def test_exported_file_is_current(exported: tuple[Exported, dict[str, Any]]) -> None:
    """openapi/<service>.json is exactly what the code generates now (else: make openapi)."""
    export, document = exported
    assert export.path.exists(), f"{export.path} is missing: run 'make openapi'"
    assert export.path.read_text() == render(document), (
        f"{export.path} is stale: run 'make openapi' and commit the result"
    )


def _resolve(document: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target: Any = document
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def _operations(document: dict[str, Any]):
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            if method in HTTP_METHODS:
                yield path, method, operation


def _is_error_schema(document: dict[str, Any], response: dict[str, Any]) -> bool:
    schema = response.get("content", {}).get("application/json", {}).get("schema")
    if schema is None:
        return False
    schema = _resolve(document, schema)
    props = schema.get("properties", {})
    return "error" in props and "message" in props


def test_every_operation_documents_its_errors(exported: tuple[Exported, dict[str, Any]]) -> None:
    """Every operation lists its 4xx/5xx answers, each as {"error", "message"}; never 422.

    Validation failures are 400 invalid_argument in Quire, so FastAPI's default
    422 must not be documented; every /v1/ call can be refused with 401 (token
    or cluster secret); an operation that takes parameters or a body can be
    refused with 400.
    """
    export, document = exported
    problems = []
    for path, method, operation in _operations(document):
        where = f"{export.name}: {method.upper()} {path}"
        responses = operation.get("responses", {})
        errors = {code: r for code, r in responses.items() if code[0] in "45"}
        if "422" in responses:
            problems.append(f"{where} documents 422 (Quire answers 400 invalid_argument)")
        if not errors and (method, path) not in NO_ERRORS:
            problems.append(f"{where} documents no error response")
        for code, response in errors.items():
            if not response.get("description"):
                problems.append(f"{where} {code} has no description")
            if not _is_error_schema(document, _resolve(document, response)):
                problems.append(f"{where} {code} is not an {{error, message}} JSON body")
        if path.startswith("/v1/") and "401" not in responses:
            problems.append(f"{where} does not document 401")
        takes_input = operation.get("parameters") or operation.get("requestBody")
        if takes_input and "400" not in responses and (method, path) not in NO_BAD_INPUT:
            problems.append(f"{where} takes input but does not document 400")
    assert not problems, "\n".join(problems)


def test_every_body_is_described(exported: tuple[Exported, dict[str, Any]]) -> None:
    """Request bodies and non-empty success responses name a media type with a schema."""
    export, document = exported
    problems = []
    for path, method, operation in _operations(document):
        where = f"{export.name}: {method.upper()} {path}"
        body = operation.get("requestBody")
        if body is not None:
            content = _resolve(document, body).get("content", {})
            if not content or not all("schema" in m for m in content.values()):
                problems.append(f"{where}: request body without a media type and schema")
        for code, response in operation.get("responses", {}).items():
            response = _resolve(document, response)
            if code.startswith("2") and code != "204":
                content = response.get("content", {})
                if not content or not all("schema" in m for m in content.values()):
                    problems.append(f"{where} {code}: response without a media type and schema")
    assert not problems, "\n".join(problems)


def test_render_is_stable() -> None:
    """The text form sorts keys, indents by 2 and ends with a newline."""
    assert render({"b": 1, "a": {"d": 2, "c": 3}}) == (
        '{\n  "a": {\n    "c": 3,\n    "d": 2\n  },\n  "b": 1\n}\n'
    )


def _walk(node: Any, where: str = "#"):
    if isinstance(node, dict):
        for key, value in node.items():
            yield where, key, value
            yield from _walk(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _walk(item, f"{where}/{i}")


def test_every_reference_resolves(exported: tuple[Exported, dict[str, Any]]) -> None:
    """Every $ref points into the document itself (a pydantic model's own ``#/$defs/``
    left inside a path resolves to nothing: generators refuse such a document)."""
    export, document = exported
    broken = []
    for where, key, value in _walk(document):
        if key == "$ref":
            try:
                _resolve(document, {"$ref": value})
            except (KeyError, TypeError):
                broken.append(f"{where}: {value}")
        if key == "$defs":
            broken.append(f"{where}: $defs left in place")
    assert not broken, f"{export.name}: {broken}"


def test_numeric_bounds_are_exact_integers(exported: tuple[Exported, dict[str, Any]]) -> None:
    """Bounds of integer fields are integers, the 64-bit id bound exactly 2**63-1 (not
    the float 9.223372036854776e18, which is 2**63)."""
    export, document = exported
    floats = [
        f"{where}/{key}: {value!r}"
        for where, key, value in _walk(document)
        if key in ("minimum", "maximum") and isinstance(value, float)
    ]
    assert not floats, f"{export.name}: {floats}"
    if export.name == "gateway":
        ledger_id = document["components"]["schemas"]["PositionModel"]["properties"]["ledger_id"]
        assert ledger_id["maximum"] == 2**63 - 1


def test_operation_ids_are_unique_route_names(exported: tuple[Exported, dict[str, Any]]) -> None:
    """Operation ids are the route functions' names (what generated clients call), each
    used once, never FastAPI's name_path_method default."""
    export, document = exported
    ids = [op["operationId"] for _, _, op in _operations(document)]
    assert len(ids) == len(set(ids)), ids
    assert all("_v1_" not in i and not i.endswith(("_get", "_post")) for i in ids), ids
