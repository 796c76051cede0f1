"""The OpenAPI documents are valid OpenAPI 3.1 and say what the services do (issue 12's fuzz
findings): the served and the checked-in documents pass openapi-spec-validator; the token
or cluster secret is a security scheme, required exactly where the service as configured
requires it; every error response is the one ``Error`` body with its codes as an enum;
bounds are the exact integers; ``from > to`` is documented; and every documented path
answers a method it does not document with 405 and an ``Allow`` naming exactly the
documented ones. Apps built without I/O, served through httpx's ASGI transport."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from openapi_spec_validator import validate
from openapi_spec_validator.validation.exceptions import OpenAPIValidationError
from referencing.exceptions import Unresolvable

from bookie.app import create_app as create_bookie
from gateway.app import create_app as create_gateway
from services.errors import ERRORS_BY_CODE
from services.limits import ID_MAX
from services.settings import BookieSettings, GatewaySettings
from services.web.errors import ERROR_CODES
from services.web.methods import MethodsMiddleware
from services.web.openapi_export import EXPORTS

HTTP_METHODS = ("get", "put", "post", "delete", "patch")
# docs/api.md's table of error codes.
API_MD_CODES = {
    "invalid_argument",
    "unauthorized",
    "ledger_not_found",
    "entry_not_found",
    "log_not_found",
    "cursor_not_found",
    "bookie_not_found",
    "not_found",
    "method_not_allowed",
    "ledger_closed",
    "ledger_fenced",
    "not_writer",
    "metadata_conflict",
    "payload_too_large",
    "idempotency_key_reused",
    "not_enough_bookies",
    "unavailable",
    "metadata_unavailable",
    "bookie_unavailable",
    "quorum_timeout",
}
# A value for each path parameter of the documents.
PATH_VALUES = {
    "ledger_id": "7",
    "entry_id": "0",
    "name": "a-log",
    "bookie_id": "127.0.0.1:3181",
    "gateway_id": "127.0.0.1:8080",
    "commit_id": "c",
    "cursor": "a-cursor",
}

Builder = Callable[[], FastAPI]
SERVICES: dict[str, Builder] = {
    "gateway": lambda: create_gateway(GatewaySettings.model_construct()),
    "bookie": lambda: create_bookie(BookieSettings.model_construct()),
}


def served(app: FastAPI) -> dict[str, Any]:
    """The document ``app`` serves at /openapi.json."""

    async def main() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.get("/openapi.json")

    r = asyncio.run(main())
    assert r.status_code == 200
    doc: dict[str, Any] = r.json()
    return doc


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if method in HTTP_METHODS:
                yield path, method, operation


def concrete(path: str) -> str:
    for name, value in PATH_VALUES.items():
        path = path.replace("{" + name + "}", value)
    assert "{" not in path, f"no value for a parameter of {path}"
    return path


# ------------------------------------------------------------------ valid OpenAPI 3.1


@pytest.mark.parametrize("service", SERVICES)
def test_served_document_is_valid_openapi_31(service: str) -> None:
    """What /openapi.json serves passes openapi-spec-validator as OpenAPI 3.1."""
    doc = served(SERVICES[service]())
    assert doc["openapi"].startswith("3.1")
    validate(doc)


@pytest.mark.parametrize("export", EXPORTS, ids=lambda e: e.name)
def test_checked_in_document_is_valid_openapi_31(export: Any) -> None:
    """openapi/<service>.json (what `make openapi` writes) is valid OpenAPI 3.1 too."""
    if not export.path.exists():
        pytest.skip(f"{export.path} is not exported")
    doc = json.loads(export.path.read_text())
    assert doc["openapi"].startswith("3.1")
    validate(doc)


def test_the_validator_catches_a_dangling_reference() -> None:
    """The check above can fail: a reference to a schema the document lacks is refused
    (like the ``#/$defs/...`` references inline body schemas used to carry)."""
    doc = served(SERVICES["gateway"]())
    doc["components"]["schemas"].pop("Error")
    with pytest.raises((OpenAPIValidationError, Unresolvable)):
        validate(doc)


# ------------------------------------------------------------------ security


def _header_params(doc: dict[str, Any]) -> set[str]:
    return {
        p["name"].lower()
        for _, _, op in operations(doc)
        for p in op.get("parameters", [])
        if p["in"] == "header"
    }


def test_token_is_optional_where_the_gateway_needs_none() -> None:
    """Without --api-token, every /v1 operation may carry the bearer token or not; no
    operation has an Authorization header parameter."""
    doc = served(SERVICES["gateway"]())
    scheme = doc["components"]["securitySchemes"]["bearerToken"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    assert "authorization" not in _header_params(doc)
    for path, method, op in operations(doc):
        if path.startswith("/v1"):
            assert op["security"] == [{"bearerToken": []}, {}], (method, path)
        else:
            assert "security" not in op, (method, path)


@pytest.mark.parametrize(
    ("settings", "plain", "admin"),
    [
        ({"api_token": "a"}, True, True),
        ({"admin_token": "b"}, False, True),
        ({"api_token": "a", "admin_token": "b"}, True, True),
    ],
)
def test_token_is_required_where_the_gateway_requires_it(
    settings: dict[str, Any], plain: bool, admin: bool
) -> None:
    """With a token configured, the served document requires the bearer scheme on the
    /v1 paths that gateway refuses without it, and only there."""
    doc = served(create_gateway(GatewaySettings.model_construct(**settings)))
    required: list[dict[str, list[str]]] = [{"bearerToken": []}]
    optional: list[dict[str, list[str]]] = [{"bearerToken": []}, {}]
    for path, method, op in operations(doc):
        if not path.startswith("/v1"):
            continue
        wanted = admin if path.startswith("/v1/admin") else plain
        assert op["security"] == (required if wanted else optional), (method, path)


def test_bookie_secret_is_required_only_with_a_cluster_secret() -> None:
    """The bookie's X-Cluster-Secret is an apiKey scheme: optional without
    --cluster-secret, required with it; never a header parameter."""
    without = served(SERVICES["bookie"]())
    with_secret = served(create_bookie(BookieSettings.model_construct(cluster_secret="s")))
    assert "x-cluster-secret" not in _header_params(without)
    for path, method, op in operations(without):
        if path.startswith("/v1"):
            assert op["security"] == [{"clusterSecret": []}, {}], (method, path)
    for path, method, op in operations(with_secret):
        if path.startswith("/v1"):
            assert op["security"] == [{"clusterSecret": []}], (method, path)


# ------------------------------------------------------------------ errors, bounds, ranges


@pytest.mark.parametrize("service", SERVICES)
def test_every_error_response_is_the_error_schema(service: str) -> None:
    """Every 4xx/5xx response of every operation is JSON referring to the one Error
    schema, whose `error` is an enum of every code an answer carries (docs/api.md's among
    them) and none of the internal vocabulary."""
    doc = served(SERVICES[service]())
    error = doc["components"]["schemas"]["Error"]
    assert error["required"] == ["error", "message"]
    codes = error["properties"]["error"]["enum"]
    assert set(codes) == set(ERROR_CODES) and API_MD_CODES <= set(codes)
    assert set(codes) <= set(ERRORS_BY_CODE) and "node_not_found" not in codes
    for path, method, op in operations(doc):
        for status, response in op["responses"].items():
            if status[0] in "45":
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/Error"}, (method, path, status)


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)


@pytest.mark.parametrize("service", SERVICES)
def test_bounds_are_exact_integers(service: str) -> None:
    """No bound is a float (FastAPI wrote `le=ID_MAX` as 2^63, one more than any id), and
    no `$defs` or `#/$defs` reference is left in the document."""
    doc = served(SERVICES[service]())
    maxima = set()
    for node in _walk(doc):
        assert "$defs" not in node
        assert not str(node.get("$ref", "")).startswith("#/$defs")
        for key in ("minimum", "maximum"):
            if key in node:
                assert not isinstance(node[key], float), node
                maxima.add(node.get("maximum"))
    assert ID_MAX in maxima and 2**63 not in maxima


def test_from_greater_than_to_is_documented() -> None:
    """A range read with from > to is 400 invalid_argument (docs/api.md), and both documents
    say so on their range read."""
    gateway = served(SERVICES["gateway"]())["paths"]["/v1/ledgers/{ledger_id}/entries"]["get"]
    bookie = served(SERVICES["bookie"]())["paths"]["/v1/ledgers/{ledger_id}/entries"]["get"]
    for op in (gateway, bookie):
        assert "from > to" in op["responses"]["400"]["description"]
    to = next(p for p in gateway["parameters"] if p["name"] == "to")
    assert "below `from`: 400" in to["description"]


def test_headers_are_documented_parameters() -> None:
    """X-Ledger-Password and Idempotency-Key are documented header parameters where they
    are read; the key with its 1-128 printable ASCII rule; no header is documented as
    possibly null (a client would send the text "null")."""
    doc = served(SERVICES["gateway"]())
    password_ops = {
        (m, p)
        for p, m, op in operations(doc)
        for x in op.get("parameters", [])
        if x["name"] == "X-Ledger-Password" and x["in"] == "header"
    }
    assert ("get", "/v1/ledgers/{ledger_id}/entries") in password_ops
    assert ("post", "/v1/ledgers/{ledger_id}/entries") in password_ops
    assert ("delete", "/v1/ledgers/{ledger_id}") in password_ops
    append = doc["paths"]["/v1/logs/{name}/records"]["post"]
    key = next(x for x in append["parameters"] if x["name"] == "Idempotency-Key")
    schema = key["schema"]
    assert (key["in"], schema["type"], schema["minLength"], schema["maxLength"]) == (
        "header",
        "string",
        1,
        128,
    )
    headers = [x for _, _, op in operations(doc) for x in op.get("parameters", [])]
    assert all("anyOf" not in x["schema"] for x in headers if x["in"] == "header")


# ------------------------------------------------------------------ 405 and Allow


def _probe(app: FastAPI, requests: list[tuple[str, str]]) -> list[httpx.Response]:
    async def main() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=MethodsMiddleware(app, app.router.routes))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return [await client.request(m, p) for m, p in requests]

    return asyncio.run(main())


@pytest.mark.parametrize("service", SERVICES)
def test_every_405_allows_exactly_the_documented_methods(service: str) -> None:
    """Each documented path, asked with each method it does not document, is 405
    method_not_allowed with Allow = its documented methods (HEAD wherever GET) — also
    under the gateway's catch-all of /v1/logs, whose methods are no path's."""
    app = SERVICES[service]()
    doc = served(app)
    cases = []
    for path, item in doc["paths"].items():
        allowed = {m.upper() for m in item if m in HTTP_METHODS}
        if "GET" in allowed:
            allowed.add("HEAD")
        for method in ("GET", "HEAD", "PUT", "POST", "DELETE", "PATCH"):
            if method not in allowed:
                cases.append((method, concrete(path), allowed))
    answers = _probe(app, [(m, p) for m, p, _ in cases])
    assert len(cases) > 20
    for (method, path, allowed), r in zip(cases, answers, strict=True):
        assert r.status_code == 405, (method, path, r.status_code, r.text)
        assert set(r.headers["allow"].split(", ")) == allowed, (method, path)
        if method != "HEAD":
            assert r.json()["error"] == "method_not_allowed"
