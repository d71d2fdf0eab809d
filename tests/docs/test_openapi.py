"""The OpenAPI document: valid OpenAPI 3.1, complete for the app's routes, true to the schemas.

Conformance of real responses is checked across the whole API suite by the `client` fixture
(tests/support/openapi_client.py); the last tests here cover what that suite does not reach
through it (rate limits) and make sure the checker itself catches contradictions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from marshmallow import Schema, fields
from openapi_spec_validator import OpenAPIV31SpecValidator, validate

from app import create_app
from app.detection.mime import ALLOWED_MIME_TYPES
from app.docs.openapi import ID_PARAMETER, NO_TOKEN, Blueprint, header, openapi_document
from app.extensions import db
from app.schemas.records import CreateMetadataSchema, FileRecordSchema, MetadataSchema
from tests.support.api import CREATE_FIELDS, PUBLIC_FIELDS, RECORD_FIELDS, Api
from tests.support.openapi_client import OpenAPIValidatingClient

HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}

EXPECTED_STATUSES = {
    ("post", "/api/tokens"): {201, 400, 413, 422, 429, 500, 503},
    ("delete", "/api/tokens/current"): {204, 401, 500, 503},
    ("post", "/api/files"): {201, 400, 401, 413, 422, 429, 500, 503},
    ("get", "/api/files"): {200, 401, 422, 500, 503},
    ("get", "/api/files/{id}"): {200, 401, 404, 500, 503},
    ("get", "/api/files/{id}/history"): {200, 401, 404, 422, 500, 503},
    ("get", "/api/audit"): {200, 401, 403, 422, 500, 503},
    ("post", "/api/files/{id}/links"): {201, 400, 401, 404, 413, 422, 429, 500, 503},
    ("get", "/api/files/{id}/links"): {200, 401, 404, 422, 500, 503},
    ("delete", "/api/files/{id}/links/{link_id}"): {204, 401, 404, 500, 503},
    ("post", "/api/links"): {201, 400, 401, 413, 422, 429, 500, 503},
    ("get", "/api/links"): {200, 401, 422, 500, 503},
    ("post", "/api/series"): {201, 400, 401, 403, 409, 413, 422, 500, 503},
    ("post", "/api/files/{id}/editions"): {201, 400, 401, 404, 409, 413, 422, 429, 500, 503},
    ("get", "/api/series"): {200, 401, 500, 503},
    ("delete", "/api/links/{link_id}"): {204, 401, 404, 500, 503},
    ("get", "/api/shared/{secret}"): {200, 404, 410, 422, 429, 500, 503},
    ("get", "/api/shared/{secret}/files/{id}/download"): {
        200,
        206,
        304,
        404,
        410,
        416,
        429,
        500,
        503,
    },
    ("get", "/api/shared/{secret}/files.zip"): {200, 404, 410, 422, 429, 500, 503},
    ("get", "/api/files/{id}/stats"): {200, 401, 404, 422, 500, 503},
    ("get", "/api/stats"): {200, 401, 403, 422, 500, 503},
    ("get", "/api/public/files/{id}/stats"): {200, 404, 500, 503},
    ("patch", "/api/files/{id}"): {200, 400, 401, 404, 409, 412, 413, 422, 429, 500, 503},
    ("delete", "/api/files/{id}"): {204, 401, 404, 500, 503},
    ("get", "/api/files/{id}/download"): {200, 206, 304, 401, 403, 404, 416, 500, 503},
    ("post", "/api/files/{id}/content"): {200, 400, 401, 404, 409, 412, 413, 422, 429, 500, 503},
    # Release approval (issue 38).
    ("post", "/api/files/{id}/release-requests"): {
        201,
        400,
        401,
        404,
        409,
        413,
        422,
        429,
        500,
        503,
    },
    # DOIs (issue 40).
    ("post", "/api/files/{id}/doi"): {201, 401, 404, 409, 429, 500, 503},
    ("delete", "/api/files/{id}/doi"): {204, 401, 404, 409, 429, 500, 503},
    ("get", "/api/files/{id}/cover"): {200, 401, 404, 500, 503},
    ("put", "/api/files/{id}/cover"): {202, 401, 404, 409, 413, 422, 429, 500, 503},
    ("delete", "/api/files/{id}/cover"): {204, 401, 404, 409, 500, 503},
    ("get", "/api/release-requests"): {200, 401, 422, 500, 503},
    ("get", "/api/release-requests/{request_id}"): {200, 401, 404, 500, 503},
    ("get", "/api/release-requests/{request_id}/content"): {
        200,
        206,
        304,
        401,
        403,
        404,
        409,
        416,
        500,
        503,
    },
    ("post", "/api/release-requests/{request_id}/approve"): {
        200,
        400,
        401,
        403,
        404,
        409,
        413,
        422,
        429,
        500,
        503,
    },
    ("post", "/api/release-requests/{request_id}/decline"): {
        200,
        400,
        401,
        403,
        404,
        409,
        413,
        422,
        429,
        500,
        503,
    },
    ("post", "/api/release-requests/{request_id}/cancel"): {
        200,
        400,
        401,
        404,
        409,
        413,
        422,
        429,
        500,
        503,
    },
    ("get", "/api/files/{id}/versions"): {200, 401, 404, 422, 500, 503},
    ("get", "/api/files/{id}/versions/{number}/download"): {
        200,
        206,
        304,
        401,
        403,
        404,
        416,
        500,
        503,
    },
    ("get", "/api/public/files/{id}/versions/{number}/download"): {
        200,
        206,
        304,
        403,
        404,
        410,
        416,
        500,
        503,
    },
    ("get", "/api/public/files"): {200, 422, 500, 503},
    ("get", "/api/public/files/{id}"): {200, 404, 410, 500, 503},
    ("get", "/api/public/files/{id}/download"): {200, 206, 304, 403, 404, 410, 416, 500, 503},
    ("get", "/api/files.zip"): {200, 401, 422, 500, 503},
    ("get", "/api/public/files.zip"): {200, 422, 500, 503},
    ("options", "/api/uploads"): {204},
    ("options", "/api/uploads/{id}"): {204},
    ("post", "/api/uploads"): {201, 400, 401, 409, 412, 413, 415, 422, 429, 460, 500, 503},
    ("head", "/api/uploads/{id}"): {200, 401, 404, 410, 412, 500, 503},
    ("patch", "/api/uploads/{id}"): {
        204,
        400,
        401,
        404,
        409,
        410,
        412,
        413,
        415,
        422,
        460,
        500,
        503,
    },
    ("delete", "/api/uploads/{id}"): {204, 401, 404, 410, 412, 500, 503},
    ("get", "/api/openapi.json"): {200, 304},
    ("get", "/api/docs"): {200},
    ("get", "/api/docs/assets/{name}"): {200, 304, 404},
    ("get", "/healthz"): {200},
    ("get", "/readyz"): {200, 503},
    ("get", "/oai"): {200, 500, 503},
    ("get", "/api/public/feed.atom"): {200, 304, 422, 500, 503},
    ("get", "/api/public/podcast.rss"): {200, 304, 422, 500, 503},
    ("post", "/oai"): {200, 500, 503},
}
NO_TOKEN_OPERATIONS = {
    ("post", "/api/tokens"),
    ("get", "/api/public/files"),
    ("get", "/api/public/files/{id}"),
    ("get", "/api/public/files/{id}/download"),
    ("get", "/api/public/files/{id}/versions/{number}/download"),
    ("get", "/api/public/files.zip"),
    ("get", "/api/shared/{secret}"),
    ("get", "/api/shared/{secret}/files/{id}/download"),
    ("get", "/api/shared/{secret}/files.zip"),
    ("get", "/api/public/files/{id}/stats"),
    ("options", "/api/uploads"),
    ("options", "/api/uploads/{id}"),
    ("get", "/api/openapi.json"),
    ("get", "/api/docs"),
    ("get", "/api/docs/assets/{name}"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/oai"),
    ("get", "/api/public/feed.atom"),
    ("get", "/api/public/podcast.rss"),
    ("post", "/oai"),
}


@pytest.fixture
def docs_app(make_sqlite_app) -> Flask:
    """An app for reading the document and its page."""
    return make_sqlite_app()


@pytest.fixture
def document(docs_app: Flask) -> dict[str, Any]:
    return docs_app.test_client().get("/api/openapi.json").get_json()


def resolve(document: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in item:
        node: Any = document
        for part in item["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        item = node
    return item


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in HTTP_METHODS:
                yield method, path, operation


def schema_of(document: dict[str, Any], name: str) -> dict[str, Any]:
    return document["components"]["schemas"][name]


def test_the_document_is_valid_openapi_3_1(document: dict[str, Any]):
    assert document["openapi"] == "3.1.0"
    validate(document, cls=OpenAPIV31SpecValidator)


def test_the_document_is_built_once_per_set_of_limits(docs_app: Flask):
    # Every response of the API suite is checked against it: a rebuild per request made
    # the suite five times slower once.
    assert openapi_document(docs_app) is openapi_document(docs_app)


def test_it_is_served_without_a_token_and_revalidated(docs_app: Flask, document: dict):
    client = docs_app.test_client()
    response = client.get("/api/openapi.json")
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    assert response.headers["Cache-Control"] == "no-cache"
    assert document == json.loads(json.dumps(openapi_document(docs_app)))
    again = client.get("/api/openapi.json", headers={"If-None-Match": response.headers["ETag"]})
    assert again.status_code == 304


def test_every_api_route_is_documented_and_nothing_else(docs_app: Flask, document: dict):
    def shape(path: str) -> str:
        return re.sub(r"\{[^}]+\}", "{}", path)

    routes = {
        (method.lower(), shape(re.sub(r"<(?:[^:<>]+:)?[^<>]+>", "{}", rule.rule)))
        for rule in docs_app.url_map.iter_rules()
        # The landing pages and their assets (app/pages) are HTML for people, not the API.
        if rule.endpoint != "static" and rule.endpoint.partition(".")[0] != "pages"
        for method in rule.methods or ()
        # Flask adds HEAD to GET and OPTIONS to everything; only views of their own count.
        if not (method == "HEAD" and "GET" in (rule.methods or ()))
        and not (method == "OPTIONS" and getattr(rule, "provide_automatic_options", True))
    }
    documented = {(method, shape(path)) for method, path, _ in operations(document)}
    assert documented == routes
    assert {(m, p) for m, p, _ in operations(document)} == set(EXPECTED_STATUSES)


def test_every_operation_documents_its_statuses(document: dict[str, Any]):
    for method, path, operation in operations(document):
        assert set(map(int, operation["responses"])) == EXPECTED_STATUSES[(method, path)], (
            method,
            path,
        )
        assert operation["operationId"] and operation["summary"] and operation["tags"]
        for status, response in operation["responses"].items():
            response = resolve(document, response)
            content = response.get("content", {})
            if int(status) in (204, 304):
                assert not content, (method, path, status)
            elif int(status) == 422:
                assert content["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/ValidationError"
                }
            elif int(status) >= 400 and path.startswith("/api/") and "json" in str(content):
                assert content["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/Error"
                }, (method, path, status)


def test_bearer_tokens_guard_everything_but_public_token_creation_and_docs(document: dict):
    assert document["security"] == [{"bearerAuth": []}]
    assert document["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "<id>|<secret>",
        "description": "A personal access token from `POST /api/tokens`.",
    }
    for method, path, operation in operations(document):
        if (method, path) in NO_TOKEN_OPERATIONS:
            assert operation["security"] == [], (method, path)
        else:
            assert "security" not in operation, (method, path)  # the global bearer applies
            assert "401" in operation["responses"], (method, path)


def test_path_ids_are_uuids(document: dict[str, Any]):
    for path, item in document["paths"].items():
        if "{id}" in path:
            (parameter,) = [p for p in item["parameters"] if p["name"] == "id"]
            assert parameter["name"] == "id" and parameter["in"] == "path"
            assert parameter["required"] is True
            assert parameter["schema"] == {"type": "string", "format": "uuid"}


def test_list_parameters_come_from_the_query_schema(document: dict[str, Any]):
    def query(path: str) -> dict[str, dict]:
        parameters = document["paths"][path]["get"]["parameters"]
        assert all(p["in"] == "query" and p["required"] is False for p in parameters)
        return {p["name"]: p for p in parameters}

    protected = query("/api/files")
    assert list(protected) == [
        "page",
        "path",
        "aktiv_id",
        "since",
        "freigabe",
        "reprotyp",
        "cursor",
        "q",
        "sort",
    ]
    assert list(query("/api/public/files")) == [
        "page",
        "path",
        "aktiv_id",
        "since",
        "reprotyp",
        "cursor",
        "q",
        "sort",
    ]
    assert protected["page"]["schema"] == {
        "type": "integer",
        "default": 1,
        "minimum": 1,
        "maximum": 999_999_999,
    }
    assert protected["freigabe"]["schema"] == {"type": "string", "enum": ["0", "1"]}
    since = re.compile(protected["since"]["schema"]["pattern"])
    for value in ("2026-04-30", "2026-04-30T10:15", "2026-04-30T10:15:00.5+01:00", "2026-04-30Z"):
        assert since.match(value), value
    assert not since.match("30.04.2026")


def test_records_match_the_response_schemas(document: dict[str, Any]):
    records = {
        "FileRecord": RECORD_FIELDS,
        "CreatedFileRecord": CREATE_FIELDS,
        "PublicFileRecord": PUBLIC_FIELDS,
    }
    assert list(FileRecordSchema().fields) == RECORD_FIELDS
    # With DOIs configured (issue 40) an owner's record answers carry two fields more, and
    # with RELEASE_APPROVAL=on a read names the pending release request (issue 46).
    optional = {
        "FileRecord": ["doi", "doi_state", "release_request"],
        "CreatedFileRecord": ["doi", "doi_state"],
    }
    for name, names in records.items():
        schema = schema_of(document, name)
        shown = [*names, *optional.get(name, [])]
        assert list(schema["properties"]) == shown, name
        assert schema["required"] == names and schema["additionalProperties"] is False
    record = schema_of(document, "FileRecord")["properties"]
    assert record["id"]["format"] == "uuid" and record["id"]["type"] == "string"
    for name in ("created_at", "updated_at"):
        assert record[name]["type"] == "string" and record[name]["format"] == "date-time"
        assert re.match(record[name]["pattern"], "2026-04-30T10:15:00.123456Z")
    assert record["sperrfrist"] == {
        "type": ["string", "null"],
        "format": "date",
        "description": record["sperrfrist"]["description"],
    }
    for name in ("aktiv_id", "path", "reprotyp", "titel", "autoren", "erstellt_von"):
        assert record[name]["type"] == ["string", "null"], name
        assert record[name]["maxLength"] == 255, name
    assert record["beschreibung"]["maxLength"] == 5000
    assert record["freigabe"]["type"] == "boolean" and record["reihenfolge"]["type"] == "integer"
    assert record["mime_type"]["enum"] == sorted(ALLOWED_MIME_TYPES)
    for name in ("original_name", "mime_type", "size", "reihenfolge", "freigabe"):
        assert "null" not in record[name]["type"], name
    assert all(field["description"] for field in record.values())


def test_the_envelope_and_the_other_bodies(document: dict[str, Any]):
    for name, item in (
        ("FileRecordPage", "FileRecord"),
        ("PublicFileRecordPage", "PublicFileRecord"),
    ):
        page, keyset = schema_of(document, name)["oneOf"]
        assert list(page["properties"]) == [
            "data",
            "current_page",
            "per_page",
            "total",
            "last_page",
            "from",
            "to",
            "first_page_url",
            "last_page_url",
            "next_page_url",
            "prev_page_url",
            "path",
            "next_cursor",
        ]
        assert page["required"] == list(page["properties"])
        assert page["properties"]["data"]["items"] == {"$ref": f"#/components/schemas/{item}"}
        for nullable in ("from", "to", "next_page_url", "prev_page_url", "next_cursor"):
            assert "null" in page["properties"][nullable]["type"]
        assert keyset["required"] == ["data", "path", "per_page", "next_cursor", "next_page_url"]
        assert keyset["additionalProperties"] is False
    assert schema_of(document, "Error")["required"] == ["message"]
    validation = schema_of(document, "ValidationError")
    assert validation["required"] == ["message", "errors"]
    assert validation["properties"]["errors"]["additionalProperties"] == {
        "type": "array",
        "items": {"type": "string"},
        "minItems": 1,
    }
    assert schema_of(document, "Token")["required"] == ["token"]
    created = schema_of(document, "CreatedFiles")["properties"]["files"]
    assert created["items"] == {"$ref": "#/components/schemas/CreatedFileRecord"}
    assert created["maxItems"] == 25


def test_request_bodies_come_from_the_validating_schemas(document: dict[str, Any]):
    def body(method: str, path: str) -> dict[str, Any]:
        request_body = document["paths"][path][method]["requestBody"]
        assert request_body["required"] is True
        return request_body["content"]

    tokens = body("post", "/api/tokens")
    assert set(tokens) == {"application/json", "application/x-www-form-urlencoded"}
    token_request = schema_of(document, "TokenRequest")
    assert token_request["required"] == ["email", "password", "token_name"]

    upload = resolve(document, body("post", "/api/files")["multipart/form-data"]["schema"])
    assert upload["required"] == ["files[]"]
    files = upload["properties"]["files[]"]
    assert files["type"] == "array" and (files["minItems"], files["maxItems"]) == (1, 25)
    assert files["items"]["type"] == "string" and files["items"]["format"] == "binary"
    assert list(upload["properties"])[1:] == list(CreateMetadataSchema().fields)
    assert upload["properties"]["reihenfolge"]["default"] == 0
    assert upload["properties"]["freigabe"]["default"] is True
    assert upload["properties"]["sperrfrist"]["format"] == "date"
    path_rule = re.compile(upload["properties"]["path"]["pattern"])
    assert all(path_rule.match(p) for p in ("a/b.c/d_e-f/./g", "reports", ""))
    assert not any(path_rule.match(p) for p in ("/a", "a/", "a//b", "a/../b", "..", "ä"))

    replace = resolve(
        document, body("post", "/api/files/{id}/content")["multipart/form-data"]["schema"]
    )
    assert replace["required"] == ["file"] and replace["properties"]["file"]["format"] == "binary"

    update = resolve(document, body("patch", "/api/files/{id}")["application/json"]["schema"])
    assert list(update["properties"]) == list(MetadataSchema().fields)
    assert update["additionalProperties"] is False and update["minProperties"] == 1
    assert update["properties"]["titel"]["type"] == ["string", "null"]
    assert update["properties"]["reihenfolge"]["type"] == "integer"  # null is refused
    assert "anyOf" in update["properties"]["freigabe"]  # true/false, 1/0, "1"/"0", "true"/...
    result = schema_of(document, "FileUpdateResult")
    assert result["required"] == ["id", "updated_at"] and result["additionalProperties"] is False


def test_downloads_are_binary_with_their_headers(document: dict[str, Any]):
    for path, cache in (
        ("/api/files/{id}/download", "private, no-store"),
        ("/api/public/files/{id}/download", "public, max-age=0, must-revalidate"),
    ):
        operation = document["paths"][path]["get"]
        assert [p["name"] for p in operation["parameters"]] == [
            "Range",
            "If-Range",
            "If-None-Match",
        ]
        responses = operation["responses"]
        assert set(responses["200"]["content"]) == ALLOWED_MIME_TYPES
        assert set(responses["200"]["headers"]) == {
            "Content-Disposition",
            "ETag",
            "Accept-Ranges",
            "X-Content-Type-Options",
            "Cache-Control",
            "Content-Length",
        }
        assert "Content-Range" in responses["206"]["headers"]
        assert "content" not in responses["304"]
        assert responses["416"]["headers"]["Content-Range"]["required"] is True
        for status in ("200", "206", "304", "416"):
            assert responses[status]["headers"]["Cache-Control"]["schema"]["const"] == cache


def test_an_endpoint_is_documented_by_its_view_alone(make_sqlite_app):
    """Its blueprint's `doc`, `alt_response` and `errors` beside the view are all a new endpoint
    needs; registering the blueprint carries it in."""
    extra = Blueprint("extra", __name__, tag="Files")

    @extra.get("/api/extra/<uuid:record_id>", parameters=[ID_PARAMETER])
    @extra.doc(operationId="readExtra")
    @extra.alt_response(200, description="Fine.")
    @extra.errors("NotFound")
    def read_extra(record_id):
        """An extra view

        Pages of {page_size} records, each of at most {max_file_size:,} bytes; {page_size!r},
        {unknown} and {"message": ...} stay as they are.
        """
        return {}

    app = make_sqlite_app(PAGE_SIZE=7, MAX_FILE_SIZE=12345)
    app.register_blueprint(extra)
    item = openapi_document(app)["paths"]["/api/extra/{id}"]
    assert item["parameters"] == [ID_PARAMETER]
    assert item["get"]["summary"] == "An extra view"
    assert item["get"]["description"] == (
        "Pages of 7 records, each of at most 12,345 bytes; {page_size!r}, {unknown} and "
        '{"message": ...} stay as they are.'
    )
    assert item["get"]["tags"] == ["Files"]
    assert item["get"]["responses"] == {
        "200": {"description": "Fine."},
        "404": {"$ref": "#/components/responses/NotFound"},
    }
    assert "/api/extra/{id}" not in openapi_document(make_sqlite_app(PAGE_SIZE=7))["paths"]

    broken = Blueprint("broken", __name__, tag="Files")

    @broken.get("/api/broken/<name>")
    @broken.doc(operationId="readBroken")
    def read_broken(name):
        """Undeclared path parameter"""
        return {}

    app = make_sqlite_app()
    app.register_blueprint(broken)
    with pytest.raises(ValueError, match="declare the path parameters"):
        openapi_document(app)


def test_a_view_docstring_is_its_summary_and_description(make_sqlite_app):
    """flask-smorest reads the docstring: the first line is the summary, the paragraph after
    the blank line the description, its wrapped lines joined by spaces."""
    extra = Blueprint("extra_docstring", __name__, tag="Files")

    @extra.get("/api/extra-docstring")
    @extra.doc(operationId="readExtraDocstring")
    @extra.alt_response(200, description="Fine.")
    def read_extra_docstring():
        """An extra view

        Its description runs over
        two lines.
        """
        return {}

    app = make_sqlite_app()
    app.register_blueprint(extra)
    operation = openapi_document(app)["paths"]["/api/extra-docstring"]["get"]
    assert operation["summary"] == "An extra view"
    assert operation["description"] == "Its description runs over two lines."


def test_a_blueprint_says_once_what_its_operations_share(make_sqlite_app):
    """Its error answers (by name, or one of its own), with its error headers; its security;
    and the fields its answers add to a component of the whole document."""

    class NoteSchema(Schema):
        note = fields.String()

    own_error = (410, {"description": "Gone for good."})
    extra = Blueprint(
        "extra_shared",
        __name__,
        tag="Files",
        errors=("NotFound", own_error),
        error_headers={"X-Extra": header("An extra header.")},
        security=NO_TOKEN,
        extends={"FileRecord": (NoteSchema,)},
    )

    @extra.get("/api/extra-shared")
    @extra.doc(operationId="readExtraShared")
    @extra.alt_response(200, description="Fine.")
    @extra.errors("ValidationFailed")
    def read_extra_shared():
        """An extra view"""
        return {}

    app = make_sqlite_app(MAX_FILES_PER_REQUEST=3)
    app.register_blueprint(extra)
    document = openapi_document(app)
    operation = document["paths"]["/api/extra-shared"]["get"]
    assert operation["security"] == []
    assert set(operation["responses"]) == {"200", "404", "410", "422"}
    for status in ("404", "410", "422"):
        assert operation["responses"][status]["headers"]["X-Extra"] == header("An extra header.")
    assert operation["responses"]["410"]["description"] == "Gone for good."
    record = schema_of(document, "FileRecord")
    assert record["properties"]["note"] == {"type": "string"}
    assert "note" not in record["required"]
    # A limit named in braces anywhere in the document is this instance's.
    assert schema_of(document, "CreatedFiles")["properties"]["files"]["maxItems"] == 3
    files = schema_of(document, "FileUploadForm")["properties"]["files[]"]
    assert files["maxItems"] == 3 and files["description"].startswith("1 to 3 files of 1 to ")


@pytest.mark.parametrize("key", ["summary", "description"])
def test_doc_takes_no_summary_or_description(key: str):
    """One convention: they come from the view's docstring."""
    with pytest.raises(TypeError, match="docstring"):
        Blueprint("extra_doc", __name__, tag="Files").doc(operationId="x", **{key: "Text"})


def test_public_errors_carry_the_public_cache_header(document: dict[str, Any]):
    for path, item in document["paths"].items():
        if path.startswith("/api/public/"):
            for status, response in item["get"]["responses"].items():
                header = response["headers"]["Cache-Control"]
                assert header["schema"]["const"] == "public, max-age=0, must-revalidate", status


# --- conformance beyond the API suite -------------------------------------------------


def validating(app: Flask) -> Api:
    app.test_client_class = OpenAPIValidatingClient
    return Api(app, app.test_client())


def test_rate_limited_answers_conform(stack_config: dict[str, Any]):
    app = create_app(
        {
            **stack_config,
            "RATELIMIT_ENABLED": True,
            "RATELIMIT_TOKENS": "1/minute",
            "RATELIMIT_UPLOADS": "1/minute",
        }
    )
    api = validating(app)
    alice = api.account()
    body = {"email": alice.email, "password": alice.password, "token_name": "x"}
    assert api.client.post("/api/tokens", json=body).status_code == 201
    assert api.client.post("/api/tokens", json=body).status_code == 429
    assert api.upload(alice).status_code == 201
    assert api.upload(alice).status_code == 429
    with app.app_context():
        db.engine.dispose()


def test_the_checker_catches_contradictions(stack_config: dict[str, Any]):
    """Guards the guard: responses that break the document fail the request that got them."""
    app = create_app(stack_config)

    @app.after_request
    def break_the_contract(response):
        from flask import request

        tamper = request.headers.get("X-Tamper")
        if tamper == "extra-field":
            response.set_data(json.dumps({**response.get_json(), "user_id": 1}))
        elif tamper == "no-etag":
            del response.headers["ETag"]
        elif tamper == "teapot":
            response.status_code = 418
        elif tamper == "html":
            response.headers["Content-Type"] = "text/html"
        return response

    api = validating(app)
    alice = api.account()
    record = api.create(alice)
    cases = {
        "extra-field": f"/api/public/files/{record['id']}",
        "no-etag": f"/api/files/{record['id']}/download",
        "teapot": f"/api/files/{record['id']}",
        "html": f"/api/public/files/{record['id']}/download",
    }
    for tamper, url in cases.items():
        with pytest.raises(AssertionError, match="OpenAPI|documented"):
            api.get(url, alice, headers={"X-Tamper": tamper})
    with app.app_context():
        db.engine.dispose()
