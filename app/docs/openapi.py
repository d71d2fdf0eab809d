"""The OpenAPI 3.1 document, built by flask-smorest from what each view declares beside it.

A view's blueprint is this module's `Blueprint` (flask-smorest's): the view's docstring is its
summary and description, and it states the rest of its operation with `doc`, its answers with
`alt_response` and `errors`; nothing else needs to know about a new endpoint (a schema it names
becomes a component by its class name; what all of a blueprint's views share, it says once).
This module holds what the whole document shares: its description, the error responses,
headers and the components several features name; the shapes are marshmallow schemas beside
the features (a field type's `openapi` says how its values show), and any text may name a
configured limit in braces. What keeps the document true is the validating test client and
Schemathesis (tests/docs). The document is built once per set of limits and blueprints, and
shared (treat it as read-only).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeVar

import flask_smorest
from apispec.ext.marshmallow import MarshmallowPlugin, OpenAPIConverter
from apispec.ext.marshmallow.common import resolve_schema_instance
from flask import Flask
from flask_smorest.spec.plugins import FlaskPlugin
from marshmallow import EXCLUDE, INCLUDE, Schema, fields

from app.detection.mime import ALLOWED_MIME_TYPES
from app.errors import ErrorSchema, ValidationErrorSchema
from app.http import PUBLIC_CACHE
from app.schemas import field_types as types
from app.schemas.pages import page_envelope
from app.schemas.records import (
    CreatedFilesSchema,
    FileUpdateResultSchema,
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
#: The error answers of a view that reads a request body.
BODY_ERRORS = ("BadRequest", "PayloadTooLarge", "ValidationFailed")
#: The settings any text of the document may name in braces (`{max_file_size:,}`), by that name.
LIMITS = {
    "max_files": "MAX_FILES_PER_REQUEST",
    "max_file_size": "MAX_FILE_SIZE",
    "page_size": "PAGE_SIZE",
    "max_json_body": "MAX_JSON_BODY",
    "max_request_size": "MAX_CONTENT_LENGTH",
    "zip_max_files": "ZIP_MAX_FILES",
    "zip_max_mb": "ZIP_MAX_MB",
}


def openapi_document(app: Flask) -> dict[str, Any]:
    """The document for this application (built on first use, then shared)."""
    limits = tuple((name, app.config.get(setting)) for name, setting in LIMITS.items())
    blueprints = tuple(bp for bp in app.blueprints.values() if isinstance(bp, Blueprint))
    return _build(limits, blueprints)


def _with_limits(value: Any, limits: dict[str, Any]) -> Any:
    """`value` with each name of `LIMITS` in braces, in any of its strings, as this instance has
    it; a string that is only such a name is the limit itself (`"maxItems": "{max_files}"`)."""
    if isinstance(value, dict):
        return {key: _with_limits(item, limits) for key, item in value.items()}
    if isinstance(value, list):
        return [_with_limits(item, limits) for item in value]
    if not isinstance(value, str):
        return value
    if (whole := _LIMIT.fullmatch(value)) and whole[2] is None:
        return limits[whole[1]]
    return _LIMIT.sub(lambda m: format(limits[m[1]], m[2] or ""), value)


_LIMIT = re.compile(r"\{(" + "|".join(LIMITS) + r")(?::([^{}]*))?\}")


# --- declaring operations beside their views --------------------------------------------

View = TypeVar("View", bound=Callable[..., Any])
_VARIABLE = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")


class Blueprint(flask_smorest.Blueprint):
    """flask-smorest's blueprint with this service's conventions: operations carry the tag
    `tag`, the error answers `errors` (by name, written out with `error_headers` if any) and,
    if given, the `security` of them all (`NO_TOKEN`); a view's docstring is its summary, a
    blank line, and its description (one paragraph: its line breaks are spaces), so `doc`
    takes neither. `extends` names the components of the whole document that this
    blueprint's answers extend, with the schemas whose fields they add (the owner's record
    answers carry the DOI's fields and the pending release request)."""

    def __init__(
        self,
        *args: Any,
        tag: str,
        errors: tuple = (),
        error_headers: Any = None,
        security: list | None = None,
        extends: Mapping[str, tuple[type[Schema], ...]] | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(*args, **kw)
        self.tag, self.common_errors, self.error_headers = tag, errors, error_headers
        self.security, self.extends = security, extends or {}

    def route(self, rule: str, *, parameters: Any = None, tags: Any = None, **options: Any):
        register = super().route(rule, parameters=parameters, tags=tags or [self.tag], **options)

        def declare(view: View) -> View:
            view = self.errors(*self.common_errors)(view)
            if self.security is not None:
                view = self.doc(security=self.security)(view)
            return register(view)

        return declare

    def doc(self, **operation: Any) -> Any:  # type: ignore[override]
        if {"summary", "description"} & operation.keys():
            raise TypeError("a view's docstring gives its summary and description, not doc()")
        return _annotating(super().doc(**operation))

    def alt_response(self, *args: Any, **kwargs: Any) -> Any:
        return _annotating(super().alt_response(*args, **kwargs))

    def errors(self, *answers: Any, headers: Any = None) -> Callable[[View], View]:
        """Error answers: those of `ERROR_RESPONSES` by name, others as (status, response);
        with `headers` (by default the blueprint's `error_headers`) written out with them."""
        headers = headers or self.error_headers

        def declare(view: View) -> View:
            for answer in answers:
                if isinstance(answer, str) and not headers:
                    view = self.alt_response(ERROR_RESPONSES[answer][0], response=answer)(view)
                    continue
                status, response = ERROR_RESPONSES[answer] if isinstance(answer, str) else answer
                if headers:
                    response = copy.deepcopy(response)
                    response["headers"] = {**response.get("headers", {}), **headers}
                view = self.doc(responses={str(status): response})(view)
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


class _Converter(OpenAPIConverter):
    """Shows the service's own field types as each says (its `openapi`, app/schemas)."""

    def init_attribute_functions(self) -> None:
        super().init_attribute_functions()
        self.attribute_functions.append(self.field2own_rules)

    def field2type_and_format(self, field: fields.Field, **kwargs: Any) -> dict[str, Any]:
        own = getattr(field, "openapi", None)
        if own is None:
            return super().field2type_and_format(field, **kwargs)
        return {key: own[key] for key in ("type", "format") if key in own}

    def field2own_rules(self, field: fields.Field, **kwargs: Any) -> dict[str, Any]:
        rules = {"maxLength": field.max_length} if isinstance(field, types.Text) else {}
        own = getattr(field, "openapi", {})
        return rules | {key: value for key, value in own.items() if key not in ("type", "format")}

    def schema2jsonschema(self, schema: Any) -> dict[str, Any]:
        """Unknown fields refused (`additionalProperties`) also where `Meta` has a description
        (apispec then leaves it out)."""
        converted = super().schema2jsonschema(schema)
        unknown = resolve_schema_instance(schema).unknown
        if unknown != EXCLUDE:
            converted["additionalProperties"] = unknown == INCLUDE
        return converted

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


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def json_content(schema: Any) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def form_body(schema: type[Schema]) -> dict[str, Any]:
    """A required multipart/form-data body (streamed: the schema only documents it)."""
    return {"required": True, "content": {"multipart/form-data": {"schema": schema}}}


def in_query(schema: Schema) -> list[dict[str, Any]]:
    """The query parameters `schema` loads, one per field."""
    return [{"in": "query", "schema": schema}]


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


def download_doc(cache: dict[str, Any]) -> dict[str, Any]:
    """What `doc` says of a download: its request headers and answers (`download_responses`)."""
    return {"parameters": DOWNLOAD_REQUEST_HEADERS, "responses": download_responses(cache)}


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


def _components(spec: Any, plugin: _Plugin, blueprints: tuple[Blueprint, ...]) -> None:
    """The components that several features share or no view names, with what the blueprints'
    answers add to them (`Blueprint.extends`)."""
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
    for name, schema, description in (
        ("FileRecord", record_schema, "A file record."),
        ("CreatedFileRecord", created_record_schema, "A file record as create returns it."),
        ("PublicFileRecord", public_record_schema, "A released file record."),
        ("FileVersion", file_version_schema, "A version a content replacement ended."),
    ):
        strict = {"description": description, "required": list(schema.fields)}
        components.schema(name, strict, schema=schema)
        if schema is not created_record_schema:  # the others are listed, a page at a time
            components.schema(f"{name}Page", _page(plugin, schema))
    components.schema("FileUpdateResult", {"minProperties": 3}, schema=FileUpdateResultSchema)
    components.schema("CreatedFiles", schema=CreatedFilesSchema)
    for blueprint in blueprints:
        for name, schemas in blueprint.extends.items():
            for schema in schemas:
                extra = plugin.converter.schema2jsonschema(schema)["properties"]
                components.schemas[name]["properties"].update(extra)
    replaced = copy.deepcopy(components.schemas["FileRecord"])
    replaced["description"] = "A file record as a content replacement returns it."
    components.schema("ReplacedFileRecord", replaced)
    components.schema(
        "FileUpdate", {"minProperties": 1, "additionalProperties": False}, schema=UpdateSchema
    )


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


def _page(plugin: _Plugin, record: Schema) -> dict[str, Any]:
    """A list answer: a numbered page or a keyset page, of at most `PAGE_SIZE` records."""
    kinds = []
    for (title, description), schema in zip(PAGE_KINDS, page_envelope(record), strict=True):
        converted = plugin.converter.schema2jsonschema(schema)
        converted["properties"]["data"]["maxItems"] = "{page_size}"
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
    "Series": "Curated lists of records (a report series): a page, a feed, an OAI-PMH set each.",
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
    _components(api.spec, plugin, blueprints)
    for blueprint in blueprints:
        api.register_blueprint(blueprint)
    document = api.spec.to_dict()
    document["tags"] = _tags()  # without the one flask-smorest adds for each blueprint
    for item in document["paths"].values():
        for operation in item.values():
            for key in ("summary", "description"):
                if isinstance(operation, dict) and key in operation:
                    operation[key] = " ".join(operation[key].split("\n"))
    return _with_limits(document, limits)
