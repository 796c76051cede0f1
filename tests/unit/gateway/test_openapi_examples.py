"""The examples in the gateway's OpenAPI document are valid instances of the schemas
they sit next to (JSON Schema 2020-12, the document's own references resolved), and
the main operations have them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from gateway.http.openapi_examples import EXAMPLES, JSON
from services.web.openapi_export import EXPORTS

MAIN = {"create_ledger", "add_entries", "read_entries", "append_records", "read_records"}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    gateway = next(e for e in EXPORTS if e.name == "gateway")
    return gateway.document()


def _registry(document: dict[str, Any]) -> Registry[Any]:
    """The document as a resource, so "urn:gateway#/components/..." resolves."""
    root: Resource[Any] = Resource(contents=document, specification=DRAFT202012)
    return Registry().with_resource("urn:gateway", root)


def _examples(document: dict[str, Any]):
    for item in document["paths"].values():
        for operation in item.values():
            bodies = [("request", operation.get("requestBody", {}))]
            bodies += list(operation.get("responses", {}).items())
            for part, body in bodies:
                for media_type, media in body.get("content", {}).items():
                    if "example" in media:
                        yield operation["operationId"], part, media_type, media


def test_every_example_matches_its_schema(document: dict[str, Any]) -> None:
    registry = _registry(document)
    checked = 0
    for operation_id, part, media_type, media in _examples(document):
        schema = json.loads(json.dumps(media["schema"]).replace('"#/', '"urn:gateway#/'))
        validator = Draft202012Validator(schema, registry=registry)
        errors = [e.message for e in validator.iter_errors(media["example"])]
        assert not errors, f"{operation_id} {part} {media_type}: {errors}"
        checked += 1
    assert checked == sum(len(media) for parts in EXAMPLES.values() for media in parts.values())


def test_the_main_operations_have_request_and_answer_examples(document: dict[str, Any]) -> None:
    found = {(op, part) for op, part, _, _ in _examples(document)}
    for operation_id in MAIN:
        assert any(op == operation_id and part.startswith("2") for op, part in found), operation_id
    for operation_id in ("create_ledger", "add_entries", "append_records"):
        assert (operation_id, "request") in found
    assert EXAMPLES["read_entries"]["200"].keys() >= {JSON}


def test_an_example_that_does_not_fit_is_caught(document: dict[str, Any]) -> None:
    """The check can fail: a page whose entry lacks its data is refused."""
    registry = _registry(document)
    validator = Draft202012Validator(
        {"$ref": "urn:gateway#/components/schemas/EntryPage"}, registry=registry
    )
    bad = {"entries": [{"entry_id": 0}], "next": None, "last_add_confirmed": 0}
    assert list(validator.iter_errors(bad))
