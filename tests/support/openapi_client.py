"""A test client that checks every response it receives against the app's OpenAPI document.

Each (request, response) pair goes through openapi-core's response validation: the status must
be documented for the operation, a JSON body must match its schema, documented headers must
match, and the content type must be one the document names. Binary download bodies are never
read, so streamed responses stay streamed: for those, status, headers and content type are
checked. A request under /api that matches no documented operation (an unknown path, a method
a path does not offer) must get a JSON error `{"message": ...}` with 401, 404 or 405. Paths
outside /api (health probes) are not part of the document and are not checked.

A numbered list page must also add up (`check_page_envelope`): its `total` is the number of
records its pages hold, so a total counted over other records than those listed fails.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from flask import Flask
from flask.testing import FlaskClient
from openapi_core import Config, OpenAPI
from openapi_core.datatypes import RequestParameters
from openapi_core.validation.response.validators import (
    V31ResponseHeadersValidator,
    V31ResponseValidator,
)
from openapi_schema_validator import OAS31Validator
from werkzeug.datastructures import Headers, ImmutableMultiDict
from werkzeug.test import TestResponse
from werkzeug.wrappers import Request

from app.docs.openapi import openapi_document
from app.tus.override import HEADER as METHOD_OVERRIDE
from app.tus.override import effective_method

JSON = "application/json"
DOCUMENTED_PREFIX = "/api/"
DOCUMENTED_PROBES = ("/healthz", "/readyz")
UNDOCUMENTED_ROUTE_STATUSES = {401, 404, 405}


def routed_method(request: Request) -> str:
    """The method the app routed by: tus's `X-HTTP-Method-Override` under /api/uploads."""
    path = request.root_path + request.path
    return effective_method(request.method, path, request.headers.get(METHOD_OVERRIDE))


class RequestAdapter:
    """openapi-core's request protocol for the request the test client sent (body not read)."""

    def __init__(self, request: Request) -> None:
        self.host_url = request.host_url
        self.path = request.root_path + request.path
        self.method = routed_method(request).lower()
        self.parameters = RequestParameters(
            query=ImmutableMultiDict(request.args),
            header=Headers(request.headers),
            cookie=request.cookies,
        )
        self.content_type = request.content_type or ""
        self.body: bytes | None = None


class ResponseAdapter:
    """openapi-core's response protocol; `data` is empty unless the body may be read."""

    def __init__(self, response: TestResponse, *, read_body: bool) -> None:
        self.status_code = response.status_code
        self.headers = Headers(response.headers)
        self.content_type = response.mimetype or ""
        self.data = response.get_data() if read_body else b""


@dataclass
class Contract:
    """One document with what it takes to check responses against it."""

    document: dict[str, Any]
    full: V31ResponseValidator
    headers_only: V31ResponseHeadersValidator
    error_schema: OAS31Validator
    routes: list[tuple[re.Pattern[str], str]]

    @classmethod
    def of(cls, document: dict[str, Any]) -> Contract:
        # The document itself is validated by tests/docs/test_openapi.py; doing it again here
        # would cost seconds in every process that runs tests (`make mutate`: every mutant).
        spec = OpenAPI.from_dict(document, config=Config(spec_validator_cls=None)).spec
        routes = [
            (re.compile("^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(path)) + "$"), path)
            for path in document["paths"]
        ]
        # Literal paths before templates, as a router would.
        routes.sort(key=lambda route: route[1].count("{"))
        return cls(
            document=document,
            full=V31ResponseValidator(spec),
            headers_only=V31ResponseHeadersValidator(spec),
            error_schema=OAS31Validator(document["components"]["schemas"]["Error"]),
            routes=routes,
        )

    def operation(self, method: str, path: str) -> dict[str, Any] | None:
        for pattern, template in self.routes:
            if pattern.match(path):
                return self.document["paths"][template].get(method)
        return None

    def resolve(self, item: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in item:
            node: Any = self.document
            for part in item["$ref"].removeprefix("#/").split("/"):
                node = node[part]
            item = node
        return item


_contracts: dict[int, Contract] = {}


def contract_for(app: Flask) -> Contract:
    document = openapi_document(app)
    contract = _contracts.get(id(document))
    if contract is None or contract.document is not document:
        contract = _contracts[id(document)] = Contract.of(document)
    return contract


def _describe(errors: list[Exception]) -> str:
    lines = []
    for error in errors:
        lines.append(f"{type(error).__name__}: {error}")
        for schema_error in getattr(error.__cause__, "schema_errors", ()) or ():
            where = "/".join(str(part) for part in schema_error.absolute_path) or "(body)"
            lines.append(f"    at {where}: {schema_error.message}")
    return "\n".join(lines)


def check_response(app: Flask, response: TestResponse) -> None:
    """Fails (AssertionError) when the response contradicts the app's OpenAPI document."""
    request = response.request
    path = request.root_path + request.path
    if not (path + "/").startswith(DOCUMENTED_PREFIX) and path not in DOCUMENTED_PROBES:
        return
    contract = contract_for(app)
    method = routed_method(request)
    where = f"{method} {request.full_path.rstrip('?')} -> {response.status_code}"
    operation = contract.operation(method.lower(), path)

    if operation is None:
        assert response.status_code in UNDOCUMENTED_ROUTE_STATUSES, (
            f"{where}: no documented operation, so only 401, 404 or 405 may answer"
        )
        assert response.mimetype == JSON, f"{where}: error answered with {response.mimetype}"
        errors = list(contract.error_schema.iter_errors(response.get_json()))
        assert not errors, f"{where}: not an error body: {[e.message for e in errors]}"
        return

    documented = operation["responses"].get(str(response.status_code))
    assert documented is not None, (
        f"{where}: status not documented (documented: {sorted(operation['responses'])})"
    )
    content = contract.resolve(documented).get("content", {})
    binary = any(media_type != JSON for media_type in content)
    adapted_request = RequestAdapter(request)
    if binary:
        assert response.mimetype in content, (
            f"{where}: content type {response.mimetype!r} not documented "
            f"(documented: {sorted(content)})"
        )
        errors = list(
            contract.headers_only.iter_errors(
                adapted_request, ResponseAdapter(response, read_body=False)
            )
        )
    else:
        if not content:
            assert response.get_data() == b"", f"{where}: documented without a body, got one"
        errors = list(
            contract.full.iter_errors(adapted_request, ResponseAdapter(response, read_body=True))
        )
    assert not errors, f"{where}: response contradicts the OpenAPI document:\n{_describe(errors)}"


PAGE_KEYS = {"data", "total", "current_page", "per_page", "last_page", "from", "to"}


def check_page_envelope(response: TestResponse) -> None:
    """Fails when a numbered list page disagrees with itself: every page before the last is
    full, the last holds what is left of `total` (on a single page: `total == len(data)`),
    pages beyond it are empty, and `last_page`, `from`, `to` follow."""
    if response.status_code != 200 or response.mimetype != JSON:
        return
    body = response.get_json()
    if not isinstance(body, dict) or not PAGE_KEYS <= set(body):
        return
    where = f"{response.request.method} {response.request.full_path.rstrip('?')}"
    total, page, per_page, count = (
        body["total"],
        body["current_page"],
        body["per_page"],
        len(body["data"]),
    )
    last_page = max(1, math.ceil(total / per_page))
    assert body["last_page"] == last_page, f"{where}: last_page {body['last_page']}, total {total}"
    before = (page - 1) * per_page
    expected = per_page if page < last_page else max(0, min(per_page, total - before))
    assert count == expected, f"{where}: {count} records listed on page {page}, total {total}"
    if count:
        assert (body["from"], body["to"]) == (before + 1, before + count), where
    else:
        assert (body["from"], body["to"]) == (None, None), where


class OpenAPIValidatingClient(FlaskClient):
    """A FlaskClient whose every response is checked against the OpenAPI document, and
    whose list pages must add up."""

    def open(self, *args: Any, **kwargs: Any) -> TestResponse:
        response = super().open(*args, **kwargs)
        check_response(self.application, response)
        check_page_envelope(response)
        return response
