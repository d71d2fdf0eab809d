"""The OpenAPI 3.1 document, built by flask-smorest from what each view declares beside it.

A view's blueprint is this module's `Blueprint` (flask-smorest's): the view's docstring is its
summary and description, and it states the rest of its operation with `doc`, its answers with
`alt_response` and `errors`; nothing else needs to know about a new endpoint (a schema it names
becomes a component by its class name). This module holds what the whole document shares: its
description, the error responses, headers and the components that carry configured limits.
What keeps the document true is the validating test client and Schemathesis (tests/docs). The
document is built once per set of limits and blueprints, and shared (treat it as read-only).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeVar

import flask_smorest
from apispec.ext.marshmallow import MarshmallowPlugin, OpenAPIConverter
from apispec.ext.marshmallow.field_converter import DEFAULT_FIELD_MAPPING
from flask import Flask
from flask_smorest.spec.plugins import FlaskPlugin
from marshmallow import Schema, fields

from app.detection.mime import ALLOWED_MIME_TYPES
from app.http import PUBLIC_CACHE
from app.schemas import field_types as types
from app.schemas.pages import page_envelope
from app.schemas.records import (
    CreatedFilesSchema,
    CreateMetadataSchema,
    FileRecordSchema,
    MetadataSchema,
    ReplaceFormSchema,
    UpdateSchema,
    created_record_schema,
    file_version_schema,
    public_record_schema,
    record_schema,
)

OPENAPI_VERSION = "3.1.0"
BEARER = "bearerAuth"
NO_TOKEN: list[dict[str, list[str]]] = []
SERVER = ("ServerError", "ServiceUnavailable")
#: The settings a view's docstring may name in braces (`{max_file_size:,}`), by that name.
LIMITS = {
    "max_files": "MAX_FILES_PER_REQUEST",
    "max_file_size": "MAX_FILE_SIZE",
    "page_size": "PAGE_SIZE",
    "max_json_body": "MAX_JSON_BODY",
    "max_request_size": "MAX_CONTENT_LENGTH",
    "zip_max_files": "ZIP_MAX_FILES",
    "zip_max_mb": "ZIP_MAX_MB",
}

# The canonical form of a stored path (input is trimmed first; an empty string means null).
PATH_PATTERN = r"^(?!(?:.*/)?\.\.(?:/|$))(?:[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*)?$"
TIMESTAMP_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$"
# Calendar validity (no 30 February) is beyond a pattern; such dates answer 422.
SINCE_PATTERN = (
    r"^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    r"(?:T(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,6})?)?)?"
    r"(?:Z|[+ -](?:[01][0-9]|2[0-3]):?[0-5][0-9])?$"
)
FLAG_STRING_PATTERN = r"^(?:[01]|[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])$"


_DOI_STATE = {
    "type": ["string", "null"],
    "enum": ["draft", "registered", "findable", None],
    "description": "With DOIs configured only: what DataCite holds (or will in a moment: "
    "the outbox sends it after the commit): draft before the record is public, findable "
    "while it is, registered (hidden) once it left public view; null without a DOI.",
}
#: Fields of record answers with DOIs configured (`DATACITE_*`); absent otherwise.
DOI_FIELDS = {
    "doi": {
        "type": ["string", "null"],
        "description": "With DOIs configured only: the record's DOI (lower case, "
        "`prefix/xxxx-xxxx`), null without one.",
        "examples": ["10.5072/3kq7-m2x0"],
    },
    "doi_state": _DOI_STATE,
}
RESERVED_DOI = {
    "type": "object",
    "description": "A DOI reserved for a record.",
    "required": ["doi", "doi_state"],
    "additionalProperties": False,
    "properties": {
        "doi": {**DOI_FIELDS["doi"], "type": "string"},
        "doi_state": {**_DOI_STATE, "type": "string", "enum": ["draft", "findable"]},
    },
}


def openapi_document(app: Flask) -> dict[str, Any]:
    """The document for this application (built on first use, then shared)."""
    limits = tuple((name, app.config.get(setting)) for name, setting in LIMITS.items())
    blueprints = tuple(bp for bp in app.blueprints.values() if isinstance(bp, Blueprint))
    return _build(limits, blueprints)


def _prose(text: str, limits: dict[str, Any]) -> str:
    """A docstring's summary or description as the document shows it: its line breaks are
    spaces, and the names of `LIMITS` in braces are this instance's limits."""
    return _LIMIT.sub(lambda m: format(limits[m[1]], m[2] or ""), " ".join(text.split("\n")))


_LIMIT = re.compile(r"\{(" + "|".join(LIMITS) + r")(?::([^{}]*))?\}")


# --- declaring operations beside their views --------------------------------------------

View = TypeVar("View", bound=Callable[..., Any])
_VARIABLE = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")


class Blueprint(flask_smorest.Blueprint):
    """flask-smorest's blueprint with this service's conventions: operations carry the tag
    `tag` and the error answers `errors` (by name, written out with `error_headers` if any); a
    view's docstring is its summary, a blank line, and its description (one paragraph: its
    line breaks are spaces, and a name of `LIMITS` in braces is this instance's limit), so
    `doc` takes neither."""

    def __init__(
        self, *args: Any, tag: str, errors: tuple = (), error_headers: Any = None, **kw: Any
    ) -> None:
        super().__init__(*args, **kw)
        self.tag, self.common_errors, self.error_headers = tag, errors, error_headers

    def route(self, rule: str, *, parameters: Any = None, tags: Any = None, **options: Any):
        register = super().route(rule, parameters=parameters, tags=tags or [self.tag], **options)
        return lambda view: register(self.errors(*self.common_errors)(view))

    def doc(self, **operation: Any) -> Any:  # type: ignore[override]
        if {"summary", "description"} & operation.keys():
            raise TypeError("a view's docstring gives its summary and description, not doc()")
        return _annotating(super().doc(**operation))

    def alt_response(self, *args: Any, **kwargs: Any) -> Any:
        return _annotating(super().alt_response(*args, **kwargs))

    def errors(self, *names: str, headers: Any = None) -> Callable[[View], View]:
        """The error answers of `ERROR_RESPONSES` by name; with `headers` (by default the
        blueprint's `error_headers`) written out with them."""
        headers = headers or self.error_headers

        def declare(view: View) -> View:
            for name in names:
                status, response = ERROR_RESPONSES[name]
                if headers:
                    response = copy.deepcopy(response)
                    response["headers"] = {**response.get("headers", {}), **headers}
                    view = self.doc(responses={str(status): response})(view)
                else:
                    view = self.alt_response(status, response=name)(view)
            return view

        return declare


def _annotating(decorator: Callable[[View], View]) -> Callable[[View], View]:
    """flask-smorest's documenting decorator without its wrapper: the view itself carries what
    it declares (in `_apidoc`, where flask-smorest keeps it), and a request calls the view, not
    a stack of wrappers."""

    def annotate(view: View) -> View:
        view._apidoc = decorator(view)._apidoc  # type: ignore[attr-defined]
        return view

    return annotate


class _Paths(FlaskPlugin):
    """A route's variables take the names of the path parameters declared with the route, in
    order: `/<uuid:record_id>` with `ID_PARAMETER` is `/{id}`."""

    def path_helper(self, rule: Any, operations: Any, parameters: list, **kwargs: Any) -> str:
        variables = _VARIABLE.findall(rule.rule)
        names = [p["name"] for p in parameters if isinstance(p, dict) and p["in"] == "path"]
        if len(names) != len(variables):
            raise ValueError(f"{rule.rule}: declare the path parameters {variables}, no others")
        return _VARIABLE.sub(lambda _: "{" + names.pop(0) + "}", rule.rule)


class _Api(flask_smorest.Api):
    """Only builds the document, on an app of its own: the app it describes keeps its own error
    handlers, JSON shape and error responses (app/errors.py, `ERROR_RESPONSES`)."""

    DEFAULT_ERROR_RESPONSE_NAME = None

    # flask-smorest's default responses and pagination header would add its error and
    # pagination schemas to the components (its ETag headers add nothing until used).
    def _register_responses(self) -> None: ...
    def _register_pagination_header(self) -> None: ...


# --- marshmallow fields of this service -------------------------------------------------

FLAG = {"type": "string", "pattern": FLAG_STRING_PATTERN}
SERVICE_RULES: dict[type, dict[str, Any]] = {
    types.Int32: {"minimum": types.INT32_MIN, "maximum": types.INT32_MAX},
    types.PageNumber: {"minimum": 1, "maximum": 999_999_999},
    types.ReleaseFilter: {"enum": ["0", "1"]},
    types.Since: {"pattern": SINCE_PATTERN, "examples": ["2026-04-30", "2026-04-30T10:15:00Z"]},
    types.Timestamp: {"pattern": TIMESTAMP_PATTERN, "examples": ["2026-04-30T10:15:00.123456Z"]},
    types.Flag: {"anyOf": [{"type": "boolean"}, {"type": "integer", "enum": [0, 1]}, FLAG]},
}


class _Converter(OpenAPIConverter):
    """Knows the rules that the service's own field types enforce."""

    field_mapping = {
        **DEFAULT_FIELD_MAPPING,
        types.Text: ("string", None),
        types.CalendarDate: ("string", "date"),
        types.Timestamp: ("string", "date-time"),
        types.Int32: ("integer", "int32"),
        types.PageNumber: ("integer", None),
        types.ReleaseFilter: ("string", None),
        types.Since: ("string", None),
        types.Flag: (None, None),
    }

    def init_attribute_functions(self) -> None:
        super().init_attribute_functions()
        self.attribute_functions.append(self.field2service_rules)

    def field2service_rules(self, field: fields.Field, **kwargs: Any) -> dict[str, Any]:
        rules = {"maxLength": field.max_length} if isinstance(field, types.Text) else {}
        if isinstance(field, types.VirtualPath):
            rules["pattern"] = PATH_PATTERN
        return {**rules, **SERVICE_RULES.get(type(field), {})}

    def fields2jsonschema(self, fields: Any, *, partial: Any = None) -> dict[str, Any]:
        """`required` in the order of the fields (apispec sorts it), as the document had it."""
        converted = super().fields2jsonschema(fields, partial=partial)
        if "required" in converted:
            required = set(converted["required"])
            converted["required"] = [name for name in converted["properties"] if name in required]
        return converted


class _Plugin(MarshmallowPlugin):
    Converter = _Converter


# --- what operations share --------------------------------------------------------------


class ErrorSchema(Schema):
    """Every error answer (app/errors.py)."""

    message = fields.String(required=True)


class ValidationErrorSchema(ErrorSchema):
    """A 422: `errors` names each field key with its messages."""

    errors = fields.Dict(
        keys=fields.String(),
        values=fields.List(fields.String(), metadata={"minItems": 1}),
        required=True,
        metadata={"minProperties": 1},
    )


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def json_content(schema: Any) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def form_body(schema: str) -> dict[str, Any]:
    """A required multipart/form-data body, streamed (hand-written: no schema loads it)."""
    return {"required": True, "content": {"multipart/form-data": {"schema": ref(schema)}}}


def json_body_doc(schema: Any, *, form: bool = False) -> dict[str, Any]:
    """A required JSON request body (`form`: a form-encoded one is accepted too)."""
    form_content = {"application/x-www-form-urlencoded": {"schema": schema}} if form else {}
    return {"required": True, "content": json_content(schema) | form_content}


def header(description: str, schema: Any = None, required: bool = True) -> dict[str, Any]:
    return {"description": description, "required": required, "schema": schema or STRING}


def header_parameter(name: str, description: str, schema: Any = None, required: bool = False):
    return {"name": name, "in": "header", **header(description, schema, required)}


def const(value: Any) -> dict[str, Any]:
    return {"type": "string", "const": value}


def public_cache(value: str) -> dict[str, Any]:
    """The Cache-Control header of public answers (`value`: the one the views send)."""
    return header("Public responses may be cached but must be revalidated.", const(value))


#: The public answers' Cache-Control, documented (public API, feeds, archives, statistics).
CACHED = {"Cache-Control": public_cache(PUBLIC_CACHE)}


def private_cache(value: str) -> dict[str, Any]:
    """The Cache-Control header of authenticated downloads."""
    return header("Authenticated downloads are never stored by caches.", const(value))


def error(description: str, **headers: Any) -> dict[str, Any]:
    headers = {"headers": headers} if headers else {}
    return {"description": description, "content": json_content(ref("Error"))} | headers


STRING = {"type": "string"}
INTEGER = {"type": "integer"}
ETAG = header("SHA-256 of the content, a strong entity tag.")
REVALIDATION_ETAG = header("Entity tag for revalidation with If-None-Match.")
RATE_LIMIT_HEADERS = {
    "X-RateLimit-Limit": header("Requests allowed in the current window.", INTEGER, False),
    "X-RateLimit-Remaining": header("Requests left in the current window.", INTEGER, False),
    "X-RateLimit-Reset": header("When the window resets (Unix time).", INTEGER, False),
}
UNAUTHENTICATED = "No valid bearer token: missing, malformed, unknown, expired or revoked."
FORBIDDEN = (
    "The record is visible but its content is blocked for this caller: it is not released "
    "(freigabe false) or under embargo (sperrfrist in the future). Administrators may always "
    "download."
)
NOT_FOUND = "No such record for this caller: unknown, another user's, or an id that is not a UUID."
WAIT = header("Seconds to wait before trying again.", INTEGER | {"minimum": 0})
#: A record's pending release request as create and PATCH answers show it (issue 38).
RELEASE_REQUEST_SUMMARY: dict[str, Any] = {
    "type": "object",
    "description": "A pending release request; `GET /api/release-requests/{id}` has all of it.",
    "required": ["id", "kind", "state", "sperrfrist"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "format": "uuid"},
        "record_id": {"type": "string", "format": "uuid"},
        "kind": {"type": "string", "enum": ["release", "sperrfrist", "change"]},
        "state": {"type": "string", "enum": ["pending"]},
        "sperrfrist": {"type": ["string", "null"], "format": "date"},
        "pending": {"$ref": "#/components/schemas/PendingChange"},
    },
}
#: What a request holding a change of a released record sets on approval (issue 38).
PENDING_CHANGE: dict[str, Any] = {
    "type": ["object", "null"],
    "description": "Of a request of kind `change` or `sperrfrist`: what the approval sets on "
    "the released record, which until then the record and the public keep as approved; null "
    "for a request to release.",
    "required": ["fields", "content"],
    "additionalProperties": False,
    "properties": {
        "fields": {
            "type": "object",
            "description": "The public fields and their new values.",
        },
        "content": {
            "type": ["object", "null"],
            "description": "The new content (download it at "
            "`/api/release-requests/{id}/content`), or null if the content stays.",
            "required": ["sha256", "size", "mime_type", "original_name", "change_note"],
            "additionalProperties": False,
            "properties": {
                "sha256": {"type": "string"},
                "size": {"type": "integer"},
                "mime_type": {"type": "string"},
                "original_name": {"type": "string"},
                "change_note": {"type": ["string", "null"]},
            },
        },
    },
}
ERROR_RESPONSES: dict[str, tuple[int, dict[str, Any]]] = {
    "BadRequest": (
        400,
        error("The request body cannot be parsed at all, e.g. a malformed multipart body."),
    ),
    "Unauthenticated": (
        401,
        error(
            UNAUTHENTICATED,
            **{"WWW-Authenticate": header("The authentication scheme to use.", const("Bearer"))},
        ),
    ),
    "Forbidden": (403, error(FORBIDDEN)),
    "AdministratorsOnly": (403, error("Only administrators may do this.")),
    "ApprovalRefused": (
        403,
        error(
            "Not an approver, or the four-eyes rule: the record's owner, the submitter and "
            "whoever changed its content or public fields since the last approval may not "
            "approve it."
        ),
    ),
    "NotFound": (404, error(NOT_FOUND)),
    "Gone": (
        410,
        error(
            "The record had a DOI and left public view (deleted, or no longer released): it is "
            "gone for good. Only while DOIs are configured (DATACITE_*)."
        ),
    ),
    "MethodNotAllowed": (
        405,
        error("The path does not offer this method.", Allow=header("The methods the path offers.")),
    ),
    "Conflict": (
        409,
        error(
            "The state does not allow this now, e.g. with RELEASE_APPROVAL on: a change of what "
            "the public sees of a released record, or a request that is no longer pending."
        ),
    ),
    "PayloadTooLarge": (413, error("The request body is larger than allowed.")),
    "PreconditionFailed": (
        412,
        error(
            "If-Match does not name the record as it is now: it changed since the client read "
            "it. Nothing was changed; read the record again."
        ),
    ),
    "ValidationFailed": (
        422,
        {
            "description": "The input broke a rule; `errors` names each field with its messages.",
            "content": json_content(ref("ValidationError")),
        },
    ),
    "TooManyRequests": (
        429,
        error("Rate limit exceeded.", **{"Retry-After": WAIT}, **RATE_LIMIT_HEADERS),
    ),
    "ServerError": (500, error("Unexpected server error; no details are disclosed.")),
    "ServiceUnavailable": (503, error("The database or the file storage cannot be reached.")),
}
ID_PARAMETER = {
    "name": "id",
    "in": "path",
    **header(
        "Record identifier. A value that is not a UUID answers 404.",
        {"type": "string", "format": "uuid"},
    ),
}
VERSION_NUMBER = {
    "name": "number",
    "in": "path",
    **header("A version number (1, 2, ...), as the record's /versions list names it.", INTEGER),
}
DISPOSITION = {"type": "string", "pattern": '^attachment; filename="[^"]*"; filename\\*=UTF-8\'\''}


def download_responses(cache: dict[str, Any]) -> dict[str, Any]:
    """200/206/304/416 of a download; the body is the stored content, streamed. `cache`: the
    Cache-Control header (`public_cache` or `private_cache`)."""
    common = {
        "Content-Disposition": header(
            "`attachment` with an ASCII fallback name and the exact original name in RFC 8187 "
            "form (`filename*=UTF-8''...`).",
            DISPOSITION,
        ),
        "ETag": ETAG,
        "Accept-Ranges": header("Single byte ranges are served.", const("bytes")),
        "X-Content-Type-Options": header("Browsers must not sniff.", const("nosniff")),
        "Cache-Control": cache,
        "Content-Length": header("Bytes in this response.", INTEGER | {"minimum": 0}),
    }
    content = {mime: {} for mime in sorted(ALLOWED_MIME_TYPES)}
    served = {"type": "string", "pattern": r"^bytes [0-9]+-[0-9]+/[0-9]+$"}
    full_size = header("The full size.", {"type": "string", "pattern": r"^bytes \*/[0-9]+$"})
    revalidation = {"ETag": ETAG, "Cache-Control": cache}
    whole = (
        "The whole content, with the stored (detected) type as Content-Type. Several ranges, "
        "other range units, or an If-Range that does not name the current ETag also get the "
        "whole content."
    )
    part = "The single byte range asked for with `Range: bytes=...`."
    return {
        "200": {"description": whole, "headers": common, "content": content},
        "206": {
            "description": part,
            "headers": common
            | {"Content-Range": header("The range served and the full size.", served)},
            "content": content,
        },
        "304": {
            "description": "`If-None-Match` names the current ETag; no body.",
            "headers": revalidation,
        },
        "416": {
            "description": "The range cannot be satisfied.",
            "headers": {"Content-Range": full_size, **revalidation},
            "content": json_content(ref("Error")),
        },
    }


#: The ETag of a record answer (app/files/versions.py).
RECORD_ETAG = header(
    "The record's strong entity tag: it changes with every change of the record. Send it "
    "back in If-Match to change the record only as you read it.",
    {"type": "string", "pattern": r'^"[0-9]+\.[0-9]{20}"$'},
)
IF_MATCH = header_parameter(
    "If-Match",
    "Change only if the record's ETag is this one (else 412, nothing changes); without it the "
    "change is unconditional.",
)

DOWNLOAD_REQUEST_HEADERS = [
    header_parameter(
        "Range", "One byte range, e.g. `bytes=0-1023`, `bytes=1024-` or `bytes=-500`."
    ),
    header_parameter("If-Range", "Serve the range only if this is the current (strong) ETag."),
    header_parameter("If-None-Match", "304 when it names the current ETag."),
]


# --- the document -----------------------------------------------------------------------


def _api_version() -> str:
    try:
        return version("file-repository")
    except PackageNotFoundError:  # pragma: no cover - running from an uninstalled checkout
        return "0.0.0"


def _description(limits: dict[str, Any]) -> str:
    body_limit = (
        f"a request body larger than {limits['max_request_size']:,} bytes is refused with 413 "
        "before it is read"
        if limits["max_request_size"]
        else "request bodies have no overall limit"
    )
    return f"""\
A multi-user file repository: upload files with descriptive metadata, list, read, download,
update, replace and delete them; a public read-only interface serves released files.

**Authentication.** `POST /api/tokens` exchanges email and password for a personal access token
(`<id>|<secret>`). Send it as `Authorization: Bearer <token>` on every `/api/files` request and on
`DELETE /api/tokens/current`. Without a valid token every path under `/api/files` answers 401,
even one that does not exist. Normal users see only their own records (another user's id is 404);
administrators see all. The administrator role cannot be obtained over HTTP.

**Errors** are JSON `{{"message": ...}}`. Validation errors (422) add `errors`, which maps each
field key (`files`, `files.N`, `file`, a metadata field, a query parameter, or `body`) to its
messages; `message` is the first message, followed by `(and N more errors)` when there are more.
A method that a path does not offer answers 405 with `Allow`; an unknown path answers 404.

**Limits of this instance.** At most {limits["max_files"]} files per upload, each of 1 to
{limits["max_file_size"]:,} bytes; {limits["page_size"]} records a page; JSON bodies up to
{limits["max_json_body"]:,} bytes; {body_limit}. Token creation and uploads are rate limited (429
with `Retry-After`).

**Public endpoints** need no token, only ever show released records (`freigabe` true), and every
response under `/api/public/` carries `Cache-Control: public, max-age=0, must-revalidate`.
"""


def _components(spec: Any, plugin: _Plugin, limits: dict[str, Any]) -> None:
    """The components whose text or bounds follow the configuration, or that no view names."""
    components = spec.components
    components.security_scheme(
        BEARER,
        {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "<id>|<secret>",
            "description": "A personal access token from `POST /api/tokens`.",
        },
    )
    for name, (_status, response) in ERROR_RESPONSES.items():
        components.response(name, response)
    components.schema("Error", schema=ErrorSchema)
    components.schema("ValidationError", schema=ValidationErrorSchema)
    records = {
        "FileRecord": (record_schema, "A file record."),
        "CreatedFileRecord": (created_record_schema, "A file record as create returns it."),
        "PublicFileRecord": (public_record_schema, "A released file record."),
    }
    records["FileVersion"] = (file_version_schema, "A version a content replacement ended.")
    for name, (schema, description) in records.items():
        strict = {"required": list(schema.fields), "additionalProperties": False}
        if name == "FileVersion":
            components.schema(name, {"description": description, **strict}, schema=schema)
            continue
        components.schema(name, {"description": description, **strict}, schema=schema)
        components.schemas[name]["properties"]["mime_type"]["enum"] = sorted(ALLOWED_MIME_TYPES)
    for name in ("FileRecord", "CreatedFileRecord"):
        components.schemas[name]["properties"].update(DOI_FIELDS)
    components.schema("ReservedDoi", RESERVED_DOI)
    for name, schema in (
        ("FileRecord", record_schema),
        ("PublicFileRecord", public_record_schema),
        ("FileVersion", file_version_schema),
    ):
        components.schema(f"{name}Page", _page(plugin, schema, limits["page_size"]))
    components.schema("CreatedFiles", schema=CreatedFilesSchema)
    components.schemas["CreatedFiles"]["properties"]["files"]["maxItems"] = limits["max_files"]
    components.schema("PendingChange", PENDING_CHANGE)
    components.schema("ReleaseRequestSummary", RELEASE_REQUEST_SUMMARY)
    components.schemas["FileRecord"]["properties"]["release_request"] = {
        "anyOf": [ref("ReleaseRequestSummary"), {"type": "null"}],
        "description": "With RELEASE_APPROVAL=on only: the record's pending release request, "
        "or null. While one waits the record reads as its editors asked for it: a waiting "
        "change's public fields, and `freigabe` true while a release waits.",
    }
    replaced = copy.deepcopy(components.schemas["FileRecord"])
    replaced["description"] = "A file record as a content replacement returns it."
    replaced["properties"]["release_request"] = {
        "anyOf": [ref("ReleaseRequestSummary"), {"type": "null"}],
        "description": "With RELEASE_APPROVAL=on only: the record's pending release request "
        "after the replacement, or null; of a released record, the new content waits in its "
        "`pending` while the record keeps the approved one.",
    }
    components.schema("ReplacedFileRecord", replaced)
    components.schemas["CreatedFiles"]["properties"]["release_requests"] = {
        "type": "array",
        "items": ref("ReleaseRequestSummary"),
        "description": "With RELEASE_APPROVAL=on only: the release request opened for each "
        "record that asked for freigabe true (stored unreleased until approved).",
    }
    metadata = [name for name, field in MetadataSchema().fields.items() if not field.load_only]
    components.schema(
        "FileUpdateResult",
        {
            "description": "The record's id, the fields that were sent, and the new updated_at.",
            "required": ["id", "updated_at"],
            "minProperties": 3,
            "additionalProperties": False,
        },
        schema=FileRecordSchema(only=("id", *metadata, "iab_themen", "updated_at")),
    )
    components.schemas["FileUpdateResult"]["properties"].update(DOI_FIELDS)
    components.schemas["FileUpdateResult"]["properties"]["release_request"] = {
        "anyOf": [ref("ReleaseRequestSummary"), {"type": "null"}],
        "description": "With RELEASE_APPROVAL=on only: the record's pending release request "
        "after this change, or null.",
    }
    components.schema(
        "FileUpdate",
        {
            "description": (
                "The metadata to change; only the fields sent change and null clears a nullable "
                "field. Strings are trimmed and an empty string becomes null; strings hold at "
                "most 255 characters (beschreibung 5000). Unknown and read-only fields are 422."
            ),
            "minProperties": 1,
            "additionalProperties": False,
        },
        schema=UpdateSchema(),
    )
    # Multipart bodies are streamed, not loaded by a schema: their forms are written out.
    binary = {"type": "string", "format": "binary", "contentMediaType": "application/octet-stream"}
    size = f"1 to {limits['max_file_size']:,} bytes"
    files = {
        "type": "array",
        "items": binary,
        "minItems": 1,
        "maxItems": limits["max_files"],
        "description": f"1 to {limits['max_files']} files of {size} each, of the allowed types. "
        "Parts named `files` or `files[N]` count too.",
    }
    components.schema(
        "FileUploadForm",
        {
            "type": "object",
            "description": "The files and the metadata that applies to every one of them. "
            "Strings are trimmed and an empty string means null; unknown form fields are "
            "ignored. The type of each file is detected from its bytes.",
            "properties": {
                "files[]": files,
                **plugin.converter.schema2jsonschema(CreateMetadataSchema())["properties"],
            },
            "required": ["files[]"],
        },
    )
    content = {**binary, "description": f"The new content: {size} of an allowed type."}
    note = plugin.converter.schema2jsonschema(ReplaceFormSchema())["properties"]["change_note"]
    form = {
        "type": "object",
        "properties": {"file": content, "change_note": note},
        "required": ["file"],
    }
    components.schema("ContentReplaceForm", form)


PAGE_KINDS = (
    (
        "Numbered page",
        "One page of records, newest first (created_at, then id, descending), in the form of "
        "Laravel's length-aware paginator. The page URLs keep the other query parameters.",
    ),
    (
        "Keyset page (with ?cursor=)",
        "The records after the cursor, same order; no total is counted.",
    ),
)


def _page(plugin: _Plugin, record: Schema, page_size: int) -> dict[str, Any]:
    """A list answer: a numbered page or a keyset page, of at most `page_size` records."""
    kinds = []
    for (title, description), schema in zip(PAGE_KINDS, page_envelope(record), strict=True):
        converted = plugin.converter.schema2jsonschema(schema)
        converted["properties"]["data"]["maxItems"] = page_size
        kinds.append({"title": title, "description": description, **converted})
    return {"oneOf": kinds}


UPLOADS_TAG = """\
Resumable uploads with the [tus 1.0.0 protocol](https://tus.io/protocols/resumable-upload):
a dropped connection costs one piece, not the whole file. Use a tus client; with
[Uppy](https://uppy.io/docs/tus/):

```js
new Uppy({ meta: { titel: "Jahresbericht", path: "reports/2026" } }).use(Tus, {
  endpoint: "/api/uploads",
  headers: { Authorization: `Bearer ${token}` },
  chunkSize: 8 * 1024 * 1024,
  allowedMetaFields: ["titel", "path", "sperrfrist", "freigabe", "beschreibung"],
});
```

or [tus-js-client](https://github.com/tus/tus-js-client):

```js
new tus.Upload(file, {
  endpoint: "/api/uploads",
  headers: { Authorization: `Bearer ${token}` },
  chunkSize: 8 * 1024 * 1024,
  metadata: { filename: file.name, titel: "Jahresbericht" },
  onAfterResponse: (req, res) => console.log(res.getHeader("Upload-Record-Id")),
}).start();
```

Only the owner sees or continues an upload. Unfinished uploads expire after the configured
hours without a new piece (`Upload-Expires`). A client that cannot send `PATCH` or `DELETE`
sends `POST` with `X-HTTP-Method-Override: PATCH` (or `DELETE`): under `/api/uploads` the
header's method is the one answered. Every answer here carries `Tus-Resumable` and
`Cache-Control: no-store`."""

TAGS = {
    "Tokens": "Personal access tokens.",
    "Files": "Your records (administrators: all records).",
    "Public": "Released records, without a token.",
    "Uploads": UPLOADS_TAG,
    "Documentation": "This document and its page.",
    "Harvesting": "OAI-PMH 2.0 for catalogues and aggregators.",
    "Operations": "Probes for load balancers and orchestrators.",
    "Share links": "Expiring, revocable links to a record or a folder (press kit) for holders "
    "without an account: the owner's side needs a token, the holder's only the link's secret.",
    "Audit": "Who changed what, and when: the audit trail (administrators) and a record's "
    "history (its owner too).",
    "Statistics": "Downloads counted by the COUNTER rules; no address is kept.",
}


def _tags() -> list[dict[str, str]]:
    return [{"name": name, "description": text} for name, text in TAGS.items()]


@lru_cache(maxsize=8)
def _build(settings: tuple, blueprints: tuple[Blueprint, ...]) -> dict[str, Any]:
    limits = dict(settings)
    plugin = _Plugin()
    # The blueprints are registered on an app of the document's own: building it changes
    # nothing in the app it describes.
    api = _Api(
        Flask(__name__),
        spec_kwargs={
            "title": "File repository API",
            "version": _api_version(),
            "openapi_version": OPENAPI_VERSION,
            "flask_plugin": _Paths(),
            "marshmallow_plugin": plugin,
            "info": {"description": _description(limits)},
            "security": [{BEARER: []}],
            "tags": _tags(),
        },
    )
    _components(api.spec, plugin, limits)
    for blueprint in blueprints:
        api.register_blueprint(blueprint)
    document = api.spec.to_dict()
    document["tags"] = _tags()  # without the one flask-smorest adds for each blueprint
    for item in document["paths"].values():
        for operation in item.values():
            for key in ("summary", "description"):
                if isinstance(operation, dict) and key in operation:
                    operation[key] = _prose(operation[key], limits)
    return document
