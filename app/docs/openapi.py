"""The OpenAPI 3.1 document, generated with apispec from the marshmallow schemas that validate
the requests and shape the responses, so that the document cannot drift from the code.

Each operation is declared beside its view with `@openapi(...)`; this module holds what the
whole document shares (description, security scheme, error responses, headers, the component
schemas) and collects the operations by walking the application's routes. The limits it states
come from the application's configuration (`Configured` text); the document is built once per
set of limits and routes, and shared (treat it as read-only).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any, NamedTuple, TypeVar

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin, OpenAPIConverter
from apispec.ext.marshmallow.field_converter import DEFAULT_FIELD_MAPPING
from flask import Flask
from marshmallow import fields

from app.auth.schemas import TokenRequestSchema
from app.detection.mime import ALLOWED_MIME_TYPES
from app.schemas import field_types, records
from app.schemas.records import created_record_schema, public_record_schema, record_schema

OPENAPI_VERSION = "3.1.0"
BEARER = "bearerAuth"
NO_TOKEN: list[dict[str, list[str]]] = []

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


class Limits(NamedTuple):
    """The configured numbers the document states."""

    max_files: int
    max_file_size: int
    page_size: int
    max_json_body: int
    max_request_size: int | None
    zip_max_files: int = 1000
    zip_max_mb: int = 10240


def openapi_document(app: Flask) -> dict[str, Any]:
    """The document for this application (built on first use, then shared)."""
    config = app.config
    limits = Limits(
        max_files=config["MAX_FILES_PER_REQUEST"],
        max_file_size=config["MAX_FILE_SIZE"],
        page_size=config["PAGE_SIZE"],
        max_json_body=config["MAX_JSON_BODY"],
        max_request_size=config.get("MAX_CONTENT_LENGTH"),
        zip_max_files=config["ZIP_MAX_FILES"],
        zip_max_mb=config["ZIP_MAX_MB"],
    )
    routes = tuple(
        Route(rule.rule, _own_methods(rule), app.view_functions[rule.endpoint])
        for rule in app.url_map.iter_rules()
        if hasattr(app.view_functions[rule.endpoint], _DECLARATIONS)
    )
    return _build(limits, routes)


# --- declaring operations beside their views --------------------------------------------


@dataclass(frozen=True)
class Configured:
    """Text that states configured limits: `str.format`ted with the fields of `Limits` when
    the document is built, e.g. `Configured("At most {max_file_size:,} bytes.")`."""

    template: str

    def render(self, limits: Limits) -> str:
        return self.template.format_map(limits._asdict())


View = TypeVar("View", bound=Callable[..., Any])
_DECLARATIONS = "__openapi__"


def openapi(
    *,
    method: str | None = None,
    path_parameters: Mapping[str, dict[str, Any]] | None = None,
    **operation: Any,
) -> Callable[[View], View]:
    """Declares the OpenAPI operation of the view below; the keywords are the fields of an
    OpenAPI operation object (`tags`, `operationId`, `summary`, `parameters`, `responses`, ...).

    `path_parameters` maps each variable of the route (`record_id` of `/<uuid:record_id>`) to
    its parameter in the document, whose name is the one the document's path uses; they are
    stated once for the whole path. A view that answers several methods declares one operation
    per `method`. `Configured` text anywhere in the operation is formatted with the limits.
    """

    def declare(view: View) -> View:
        declarations = view.__dict__.setdefault(_DECLARATIONS, {})
        key = method.upper() if method else None
        if key in declarations:
            raise ValueError(f"{view.__qualname__}: the operation of {key or 'its method'} twice")
        declarations[key] = (dict(path_parameters or {}), operation)
        return view

    return declare


class Route(NamedTuple):
    rule: str
    methods: tuple[str, ...]
    view: Callable[..., Any]


_VARIABLE = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")


def _own_methods(rule: Any) -> tuple[str, ...]:
    """The methods of the view itself: not the HEAD that Flask adds to GET, nor its OPTIONS."""
    methods = rule.methods or set()
    return tuple(
        method
        for method in ("GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE")
        if method in methods
        and not (method == "HEAD" and "GET" in methods)
        and not (method == "OPTIONS" and getattr(rule, "provide_automatic_options", True))
    )


def _rendered(value: Any, limits: Limits) -> Any:
    """A copy of the declaration with its `Configured` text formatted (never shared: apispec
    rewrites what it is given)."""
    if isinstance(value, Configured):
        return value.render(limits)
    if isinstance(value, dict):
        return {key: _rendered(item, limits) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_rendered(item, limits) for item in value]
    return value


def _document_path(
    rule: str, path_parameters: Mapping[str, dict[str, Any]]
) -> tuple[str, list[dict[str, Any]]]:
    """The document's path of a route (`/<uuid:record_id>` becomes `/{id}`) and its parameters."""
    variables = _VARIABLE.findall(rule)
    if sorted(variables) != sorted(path_parameters):
        raise ValueError(f"{rule}: declare the path parameters {variables}, no others")
    path = _VARIABLE.sub(lambda match: "{" + path_parameters[match[1]]["name"] + "}", rule)
    return path, [path_parameters[name] for name in variables]


def _add_paths(spec: APISpec, routes: Iterable[Route], limits: Limits) -> None:
    """One path item per documented path, in the order of the routes."""
    paths: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {}
    for route in routes:
        declarations = getattr(route.view, _DECLARATIONS)
        for method in route.methods:
            if method in declarations:
                path_parameters, operation = declarations[method]
            elif None in declarations and len(route.methods) == 1:
                path_parameters, operation = declarations[None]
            else:
                raise ValueError(f"{route.rule}: no OpenAPI operation declared for {method}")
            path, parameters = _document_path(route.rule, path_parameters)
            parameters = _rendered(parameters, limits)
            known, operations = paths.setdefault(path, (parameters, {}))
            if known != parameters:
                raise ValueError(f"{path}: the operations state different path parameters")
            operations[method.lower()] = _rendered(operation, limits)
    for path, (parameters, operations) in paths.items():
        spec.path(path, parameters=parameters or None, operations=operations)


# --- marshmallow fields of this service -------------------------------------------------


class _Converter(OpenAPIConverter):
    """Knows the rules that the service's own field types enforce."""

    field_mapping = {
        **DEFAULT_FIELD_MAPPING,
        field_types.Text: ("string", None),
        field_types.CalendarDate: ("string", "date"),
        field_types.Timestamp: ("string", "date-time"),
        field_types.Int32: ("integer", "int32"),
        field_types.PageNumber: ("integer", None),
        field_types.ReleaseFilter: ("string", None),
        field_types.Since: ("string", None),
        field_types.Flag: (None, None),
    }

    def init_attribute_functions(self) -> None:
        super().init_attribute_functions()
        self.attribute_functions.append(self.field2service_rules)

    def field2service_rules(self, field: fields.Field, **kwargs: Any) -> dict[str, Any]:
        if isinstance(field, field_types.VirtualPath):
            return {"maxLength": field.max_length, "pattern": PATH_PATTERN}
        if isinstance(field, field_types.Text):
            return {"maxLength": field.max_length}
        if isinstance(field, field_types.Int32):
            return {"minimum": field_types.INT32_MIN, "maximum": field_types.INT32_MAX}
        if isinstance(field, field_types.PageNumber):
            return {"minimum": 1, "maximum": 999_999_999}
        if isinstance(field, field_types.ReleaseFilter):
            return {"enum": ["0", "1"]}
        if isinstance(field, field_types.Since):
            return {"pattern": SINCE_PATTERN, "examples": ["2026-04-30", "2026-04-30T10:15:00Z"]}
        if isinstance(field, field_types.Timestamp):
            return {"pattern": TIMESTAMP_PATTERN, "examples": ["2026-04-30T10:15:00.123456Z"]}
        if isinstance(field, field_types.Flag):
            return {
                "anyOf": [
                    {"type": "boolean"},
                    {"type": "integer", "enum": [0, 1]},
                    {"type": "string", "pattern": FLAG_STRING_PATTERN},
                ]
            }
        return {}


class _Plugin(MarshmallowPlugin):
    Converter = _Converter


# --- reusable pieces --------------------------------------------------------------------


def ref(kind: str, name: str) -> dict[str, str]:
    return {"$ref": f"#/components/{kind}/{name}"}


def json_content(schema: Any) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def header(description: str, schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    return {"description": description, "required": required, "schema": schema}


def public_cache(value: str) -> dict[str, Any]:
    """The Cache-Control header of public answers (`value`: the one the views send)."""
    return header(
        "Public responses may be cached but must be revalidated.",
        {"type": "string", "const": value},
    )


def private_cache(value: str) -> dict[str, Any]:
    """The Cache-Control header of authenticated downloads."""
    return header(
        "Authenticated downloads are never stored by caches.", {"type": "string", "const": value}
    )


ETAG = header("SHA-256 of the content, a strong entity tag.", {"type": "string"})
REVALIDATION_ETAG = header("Entity tag for revalidation with If-None-Match.", {"type": "string"})
RATE_LIMIT_HEADERS = {
    "X-RateLimit-Limit": header(
        "Requests allowed in the current window.", {"type": "integer"}, required=False
    ),
    "X-RateLimit-Remaining": header(
        "Requests left in the current window.", {"type": "integer"}, required=False
    ),
    "X-RateLimit-Reset": header(
        "When the window resets (Unix time).", {"type": "integer"}, required=False
    ),
}


def error(description: str, **headers: dict[str, Any]) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": description,
        "content": json_content(ref("schemas", "Error")),
    }
    if headers:
        response["headers"] = headers
    return response


ERROR_RESPONSES: dict[str, tuple[int, dict[str, Any]]] = {
    "BadRequest": (
        400,
        error("The request body cannot be parsed at all, e.g. a malformed multipart body."),
    ),
    "Unauthenticated": (
        401,
        error(
            "No valid bearer token: missing, malformed, unknown, expired or revoked.",
            **{
                "WWW-Authenticate": header(
                    "The authentication scheme to use.", {"type": "string", "const": "Bearer"}
                )
            },
        ),
    ),
    "Forbidden": (
        403,
        error(
            "The record is visible but its content is blocked for this caller: it is not "
            "released (freigabe false) or under embargo (sperrfrist in the future). "
            "Administrators may always download."
        ),
    ),
    "NotFound": (
        404,
        error(
            "No such record for this caller: unknown, another user's, or an id that is not a UUID."
        ),
    ),
    "MethodNotAllowed": (
        405,
        error(
            "The path does not offer this method.",
            Allow=header("The methods the path offers.", {"type": "string"}),
        ),
    ),
    "PayloadTooLarge": (413, error("The request body is larger than allowed.")),
    "ValidationFailed": (
        422,
        {
            "description": "The input broke a rule; `errors` names each field with its messages.",
            "content": json_content(ref("schemas", "ValidationError")),
        },
    ),
    "TooManyRequests": (
        429,
        error(
            "Rate limit exceeded.",
            **{
                "Retry-After": header(
                    "Seconds to wait before trying again.", {"type": "integer", "minimum": 0}
                ),
            },
            **RATE_LIMIT_HEADERS,
        ),
    ),
    "ServerError": (500, error("Unexpected server error; no details are disclosed.")),
    "ServiceUnavailable": (
        503,
        error("The database or the file storage cannot be reached."),
    ),
}


def errors(*names: str, cache: dict[str, Any] | None = None) -> dict[str, Any]:
    """Error responses by component name; with `cache` (public answers) each one is written out
    with that Cache-Control header too."""
    responses: dict[str, Any] = {}
    for name in names:
        status, response = ERROR_RESPONSES[name]
        if cache is not None:
            response = copy.deepcopy(response)
            response.setdefault("headers", {})["Cache-Control"] = cache
            responses[str(status)] = response
        else:
            responses[str(status)] = name
    return responses


ID_PARAMETER = {
    "name": "id",
    "in": "path",
    "required": True,
    "description": "Record identifier. A value that is not a UUID answers 404.",
    "schema": {"type": "string", "format": "uuid"},
}


def download_responses(cache: dict[str, Any]) -> dict[str, Any]:
    """200/206/304/416 of a download; the body is the stored content, streamed. `cache`: the
    Cache-Control header (`public_cache` or `private_cache`)."""
    common = {
        "Content-Disposition": header(
            "`attachment` with an ASCII fallback name and the exact original name in RFC 8187 "
            "form (`filename*=UTF-8''...`).",
            {"type": "string", "pattern": '^attachment; filename="[^"]*"; filename\\*=UTF-8\'\''},
        ),
        "ETag": ETAG,
        "Accept-Ranges": header(
            "Single byte ranges are served.", {"type": "string", "const": "bytes"}
        ),
        "X-Content-Type-Options": header(
            "Browsers must not sniff.", {"type": "string", "const": "nosniff"}
        ),
        "Cache-Control": cache,
    }
    length = header("Bytes in this response.", {"type": "integer", "minimum": 0})
    content = {mime: {} for mime in sorted(ALLOWED_MIME_TYPES)}
    return {
        "200": {
            "description": (
                "The whole content, with the stored (detected) type as Content-Type. Several "
                "ranges, other range units, or an If-Range that does not name the current ETag "
                "also get the whole content."
            ),
            "headers": {**common, "Content-Length": length},
            "content": content,
        },
        "206": {
            "description": "The single byte range asked for with `Range: bytes=...`.",
            "headers": {
                **common,
                "Content-Length": length,
                "Content-Range": header(
                    "The range served and the full size.",
                    {"type": "string", "pattern": r"^bytes [0-9]+-[0-9]+/[0-9]+$"},
                ),
            },
            "content": content,
        },
        "304": {
            "description": "`If-None-Match` names the current ETag; no body.",
            "headers": {"ETag": ETAG, "Cache-Control": cache},
        },
        "416": {
            "description": "The range cannot be satisfied.",
            "headers": {
                "Content-Range": header(
                    "The full size.", {"type": "string", "pattern": r"^bytes \*/[0-9]+$"}
                ),
                "ETag": ETAG,
                "Cache-Control": cache,
            },
            "content": json_content(ref("schemas", "Error")),
        },
    }


DOWNLOAD_REQUEST_HEADERS: list[dict[str, Any]] = [
    {
        "name": "Range",
        "in": "header",
        "required": False,
        "description": "One byte range, e.g. `bytes=0-1023`, `bytes=1024-` or `bytes=-500`.",
        "schema": {"type": "string"},
    },
    {
        "name": "If-Range",
        "in": "header",
        "required": False,
        "description": "Serve the range only if this is the current (strong) ETag.",
        "schema": {"type": "string"},
    },
    {
        "name": "If-None-Match",
        "in": "header",
        "required": False,
        "description": "304 when it names the current ETag.",
        "schema": {"type": "string"},
    },
]


# --- the document -----------------------------------------------------------------------


def _api_version() -> str:
    try:
        return version("file-repository")
    except PackageNotFoundError:  # pragma: no cover - running from an uninstalled checkout
        return "0.0.0"


def _description(limits: Limits) -> str:
    body_limit = (
        f"a request body larger than {limits.max_request_size:,} bytes is refused with 413 "
        "before it is read"
        if limits.max_request_size
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

**Limits of this instance.** At most {limits.max_files} files per upload, each of 1 to
{limits.max_file_size:,} bytes; {limits.page_size} records a page; JSON bodies up to
{limits.max_json_body:,} bytes; {body_limit}. Token creation and uploads are rate limited (429
with `Retry-After`).

**Public endpoints** need no token, only ever show released records (`freigabe` true), and every
response under `/api/public/` carries `Cache-Control: public, max-age=0, must-revalidate`.
"""


def _page_envelope(item: dict[str, Any], page_size: int) -> dict[str, Any]:
    position = {"type": ["integer", "null"], "minimum": 1}
    url = {"type": "string", "format": "uri"}
    optional_url = {"type": ["string", "null"], "format": "uri"}
    properties = {
        "data": {"type": "array", "items": item, "maxItems": page_size},
        "current_page": {"type": "integer", "minimum": 1},
        "per_page": {"type": "integer", "minimum": 1},
        "total": {"type": "integer", "minimum": 0},
        "last_page": {"type": "integer", "minimum": 1},
        "from": {**position, "description": "Position of the first record; null when empty."},
        "to": {**position, "description": "Position of the last record; null when empty."},
        "first_page_url": url,
        "last_page_url": url,
        "next_page_url": {**optional_url, "description": "null on the last page."},
        "prev_page_url": {**optional_url, "description": "null on the first page."},
        "path": {**url, "description": "The list URL without query."},
        "next_cursor": {
            "type": ["string", "null"],
            "description": "Continue with ?cursor=<this> (keyset pagination); null at the end.",
        },
    }
    page = {
        "type": "object",
        "title": "Numbered page",
        "description": (
            "One page of records, newest first (created_at, then id, descending), in the form "
            "of Laravel's length-aware paginator. The page URLs keep the other query parameters."
        ),
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
    keyset = {
        "type": "object",
        "title": "Keyset page (with ?cursor=)",
        "description": "The records after the cursor, same order; no total is counted.",
        "properties": {
            "data": properties["data"],
            "path": properties["path"],
            "per_page": properties["per_page"],
            "next_cursor": properties["next_cursor"],
            "next_page_url": {**optional_url, "description": "null after the last record."},
        },
        "required": ["data", "path", "per_page", "next_cursor", "next_page_url"],
        "additionalProperties": False,
    }
    return {"oneOf": [page, keyset]}


def _register_schemas(spec: APISpec, plugin: _Plugin, limits: Limits) -> None:
    components = spec.components
    components.schema(
        "Error",
        {
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
            "additionalProperties": False,
        },
    )
    components.schema(
        "ValidationError",
        {
            "type": "object",
            "properties": {
                "message": {"type": "string"},
                "errors": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "array",
                        "items": {"type": "string"},
                        "minItems": 1,
                    },
                    "minProperties": 1,
                },
            },
            "required": ["message", "errors"],
            "additionalProperties": False,
        },
    )
    components.schema("TokenRequest", schema=TokenRequestSchema())
    components.schema(
        "Token",
        {
            "type": "object",
            "properties": {
                "token": {
                    "type": "string",
                    "pattern": r"^[0-9]+\|[A-Za-z0-9_-]{43,}$",
                    "description": "`<id>|<secret>`; shown only this once.",
                }
            },
            "required": ["token"],
            "additionalProperties": False,
        },
    )

    record_components = {
        "FileRecord": (record_schema, "A file record."),
        "CreatedFileRecord": (created_record_schema, "A file record as create returns it."),
        "PublicFileRecord": (public_record_schema, "A released file record."),
    }
    mime_types = sorted(ALLOWED_MIME_TYPES)
    for name, (schema, description) in record_components.items():
        components.schema(
            name,
            {
                "description": description,
                "required": list(schema.fields),
                "additionalProperties": False,
            },
            schema=schema,
        )
        components.schemas[name]["properties"]["mime_type"]["enum"] = mime_types

    metadata_fields = tuple(
        name for name, field in records.MetadataSchema().fields.items() if not field.load_only
    )
    update_result_schema = records.FileRecordSchema(only=("id", *metadata_fields, "updated_at"))
    components.schema(
        "FileUpdateResult",
        {
            "description": "The record's id, the fields that were sent, and the new updated_at.",
            "required": ["id", "updated_at"],
            "minProperties": 3,
            "additionalProperties": False,
        },
        schema=update_result_schema,
    )
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
        schema=records.UpdateSchema(),
    )
    assert plugin.converter is not None
    metadata_form = plugin.converter.schema2jsonschema(records.CreateMetadataSchema())
    binary = {"type": "string", "format": "binary", "contentMediaType": "application/octet-stream"}
    components.schema(
        "FileUploadForm",
        {
            "type": "object",
            "description": (
                "The files and the metadata that applies to every one of them. Strings are "
                "trimmed and an empty string means null; unknown form fields are ignored. The "
                "type of each file is detected from its bytes."
            ),
            "properties": {
                "files[]": {
                    "type": "array",
                    "items": binary,
                    "minItems": 1,
                    "maxItems": limits.max_files,
                    "description": (
                        f"1 to {limits.max_files} files of 1 to {limits.max_file_size:,} bytes "
                        "each, of the allowed types. Parts named `files` or `files[N]` count too."
                    ),
                },
                **metadata_form["properties"],
            },
            "required": ["files[]"],
        },
    )
    components.schema(
        "ContentReplaceForm",
        {
            "type": "object",
            "properties": {
                "file": {
                    **binary,
                    "description": (
                        f"The new content: 1 to {limits.max_file_size:,} bytes of an allowed type."
                    ),
                }
            },
            "required": ["file"],
        },
    )
    components.schema(
        "CreatedFiles",
        {
            "type": "object",
            "properties": {
                "files": {
                    "type": "array",
                    "items": ref("schemas", "CreatedFileRecord"),
                    "minItems": 1,
                    "maxItems": limits.max_files,
                }
            },
            "required": ["files"],
            "additionalProperties": False,
        },
    )
    components.schema(
        "FileRecordPage", _page_envelope(ref("schemas", "FileRecord"), limits.page_size)
    )
    components.schema(
        "PublicFileRecordPage",
        _page_envelope(ref("schemas", "PublicFileRecord"), limits.page_size),
    )


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
hours without a new piece (`Upload-Expires`)."""


@lru_cache(maxsize=8)
def _build(limits: Limits, routes: tuple[Route, ...]) -> dict[str, Any]:
    plugin = _Plugin()
    spec = APISpec(
        title="File repository API",
        version=_api_version(),
        openapi_version=OPENAPI_VERSION,
        plugins=[plugin],
        info={"description": _description(limits)},
        security=[{BEARER: []}],
        tags=[
            {"name": "Tokens", "description": "Personal access tokens."},
            {"name": "Files", "description": "Your records (administrators: all records)."},
            {"name": "Public", "description": "Released records, without a token."},
            {"name": "Uploads", "description": UPLOADS_TAG},
            {"name": "Documentation", "description": "This document and its page."},
            {"name": "Harvesting", "description": "OAI-PMH 2.0 for catalogues and aggregators."},
            {"name": "Operations", "description": "Probes for load balancers and orchestrators."},
        ],
    )
    spec.components.security_scheme(
        BEARER,
        {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "<id>|<secret>",
            "description": "A personal access token from `POST /api/tokens`.",
        },
    )
    for name, (_status, response) in ERROR_RESPONSES.items():
        spec.components.response(name, response)
    _register_schemas(spec, plugin, limits)
    _add_paths(spec, routes, limits)
    return spec.to_dict()
