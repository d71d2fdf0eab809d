"""The tus endpoints in the OpenAPI document (called by app/docs/openapi.py)."""

from __future__ import annotations

from typing import Any

from apispec import APISpec

from app.docs import openapi as doc
from app.tus import services

TUS_RESUMABLE = {
    "name": "Tus-Resumable",
    "in": "header",
    "required": True,
    "description": "The protocol version; anything else answers 412.",
    "schema": {"type": "string", "const": services.TUS_VERSION},
}
WHOLE_NUMBER = {"type": "string", "pattern": "^[0-9]{1,18}$"}
UPLOAD_ID = {
    "name": "id",
    "in": "path",
    "required": True,
    "description": "The upload, as the `Location` of its creation names it.",
    "schema": {"type": "string", "format": "uuid"},
}
BYTES = {"application/offset+octet-stream": {"schema": {"type": "string", "format": "binary"}}}


def _h(description: str, schema: dict[str, Any] | None = None, required: bool = True) -> Any:
    return doc._header(description, schema or {"type": "string"}, required)


ALWAYS = {
    "Tus-Resumable": _h("The protocol version.", {"type": "string", "const": services.TUS_VERSION}),
    "Cache-Control": _h("Upload state is never cached.", {"type": "string", "const": "no-store"}),
}
STATE = {
    **ALWAYS,
    "Upload-Offset": _h("Bytes received so far.", WHOLE_NUMBER),
    "Upload-Expires": _h(
        "When an unfinished upload is removed (RFC 9110 date); every accepted piece moves it on."
    ),
    "Upload-Record-Id": _h(
        "Once the last byte is in: the id of the new record.", {"type": "string"}, False
    ),
}


def _tus_error(status_description: str) -> dict[str, Any]:
    response = doc._error(status_description)
    response["headers"] = dict(ALWAYS)
    return response


def _errors(*statuses: int) -> dict[str, Any]:
    known = {
        400: _tus_error(
            "A header is missing or malformed (`Upload-Length`, `Upload-Offset`, "
            "`Upload-Metadata`, `Upload-Checksum`), or `Upload-Defer-Length` was sent."
        ),
        401: _with_always(doc.ERROR_RESPONSES["Unauthenticated"][1]),
        404: _tus_error("No such upload of yours (other users' uploads are 404 too)."),
        409: _tus_error("`Upload-Offset` is not the upload's offset (ask with HEAD)."),
        410: _tus_error("The upload has expired."),
        412: {
            "description": "`Tus-Resumable` is missing or not 1.0.0.",
            "headers": {"Tus-Version": _h("Versions spoken.")},
            "content": doc._json(doc._ref("schemas", "Error")),
        },
        413: _tus_error(
            "`Upload-Length` is over `Tus-Max-Size`, or the body goes beyond `Upload-Length`."
        ),
        415: _tus_error("The body is not `application/offset+octet-stream`."),
        422: _with_always(doc.ERROR_RESPONSES["ValidationFailed"][1]),
        429: _with_always(doc.ERROR_RESPONSES["TooManyRequests"][1]),
        460: _tus_error("`Upload-Checksum` does not match the body; nothing was kept."),
        500: _with_always(doc.ERROR_RESPONSES["ServerError"][1]),
        503: _with_always(doc.ERROR_RESPONSES["ServiceUnavailable"][1]),
    }
    return {str(status): known[status] for status in statuses}


def _without_body(responses: dict[str, Any]) -> dict[str, Any]:
    """Answers to HEAD: the same statuses and headers, never a body."""
    return {
        status: {k: v for k, v in response.items() if k != "content"}
        for status, response in responses.items()
    }


def _with_always(response: dict[str, Any]) -> dict[str, Any]:
    response = {**response}
    response["headers"] = {**response.get("headers", {}), **ALWAYS}
    return response


def _header_parameter(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "in": "header",
        "required": False,
        "description": description,
        "schema": schema,
    }


CHECKSUM = _header_parameter(
    "Upload-Checksum",
    "`sha1 <base64 digest>` or `sha256 <base64 digest>` of this body; a mismatch is 460.",
    {"type": "string"},
)
VALIDATION = (
    "`Upload-Metadata` carries `filename` (or `name`) and the metadata fields of "
    "`POST /api/files` (`titel`, `path`, `sperrfrist`, `freigabe`, ...), base64-encoded as tus "
    "says; they are checked with the same rules and messages (422) before any byte is accepted."
)
COMPLETION = (
    "When the last byte is in, the file goes through the type detection, size limit and record "
    "creation of `POST /api/files`: the answer carries `Upload-Record-Id` and the record's "
    "`Location`, or a 422 on `file` (type) with nothing stored."
)


TAG = """\
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


def add_upload_paths(spec: APISpec, max_file_size: int) -> None:
    tags = ["Uploads"]
    spec.path(
        "/api/uploads",
        operations={
            "options": {
                "tags": tags,
                "operationId": "discoverUploads",
                "summary": "What this tus server speaks",
                "security": doc.NO_TOKEN,
                "responses": {
                    "204": {
                        "description": "The protocol's discovery headers.",
                        "headers": {
                            "Tus-Version": _h("Versions spoken.", {"const": services.TUS_VERSION}),
                            "Tus-Extension": _h(
                                "Extensions.", {"type": "string", "const": services.EXTENSIONS}
                            ),
                            "Tus-Max-Size": _h(
                                "Largest upload, in bytes.",
                                {"type": "string", "pattern": "^[0-9]+$"},
                            ),
                            "Tus-Checksum-Algorithm": _h(
                                "Checksums of `Upload-Checksum`.",
                                {"type": "string", "const": ",".join(services.CHECKSUMS)},
                            ),
                        },
                    }
                },
            },
            "post": {
                "tags": tags,
                "operationId": "createUpload",
                "summary": "Start a resumable upload (tus creation)",
                "description": (
                    f"At most {max_file_size:,} bytes (`Upload-Length`). {VALIDATION} With a body "
                    "(creation with upload) its bytes are the first piece. Rate limited per user "
                    f"(with uploads). {COMPLETION}"
                ),
                "parameters": [
                    TUS_RESUMABLE,
                    {
                        **_header_parameter(
                            "Upload-Length", "Size of the whole file in bytes.", WHOLE_NUMBER
                        ),
                        "required": True,
                    },
                    _header_parameter(
                        "Upload-Metadata",
                        "`key base64(value)` pairs separated by commas.",
                        {"type": "string"},
                    ),
                    CHECKSUM,
                ],
                "requestBody": {"required": False, "content": BYTES},
                "responses": {
                    "201": {
                        "description": "Created; `Location` is the upload's URL (relative).",
                        "headers": {
                            **STATE,
                            "Location": _h("The upload, `/api/uploads/{id}`."),
                        },
                    },
                    **_errors(400, 401, 409, 413, 415, 422, 429, 460, 500, 503),
                    "412": _errors(412)["412"],
                },
            },
        },
    )
    spec.path(
        "/api/uploads/{id}",
        parameters=[UPLOAD_ID],
        operations={
            "head": {
                "tags": tags,
                "operationId": "readUpload",
                "summary": "How far an upload got",
                "parameters": [TUS_RESUMABLE],
                "responses": {
                    "200": {
                        "description": "The upload's offset, length and metadata.",
                        "headers": {
                            **STATE,
                            "Upload-Length": _h("Size of the whole file.", WHOLE_NUMBER),
                            "Upload-Metadata": _h("As sent at creation.", required=False),
                        },
                    },
                    **_without_body(_errors(401, 404, 410, 412, 500, 503)),
                },
            },
            "patch": {
                "tags": tags,
                "operationId": "appendToUpload",
                "summary": "Send the next piece",
                "description": (
                    "The body is taken whole or not at all: a piece cut off by a dropped "
                    f"connection is not kept, so the client resends from the offset. {COMPLETION}"
                ),
                "parameters": [
                    TUS_RESUMABLE,
                    {
                        **_header_parameter(
                            "Upload-Offset", "Where this piece starts.", WHOLE_NUMBER
                        ),
                        "required": True,
                    },
                    CHECKSUM,
                ],
                "requestBody": {"required": True, "content": BYTES},
                "responses": {
                    "204": {
                        "description": "Kept; `Upload-Offset` is the new offset.",
                        "headers": {
                            **STATE,
                            "Location": _h(
                                "After the last piece: the new record, `/api/files/{id}`.",
                                required=False,
                            ),
                        },
                    },
                    **_errors(400, 401, 404, 409, 410, 412, 413, 415, 422, 460, 500, 503),
                },
            },
            "delete": {
                "tags": tags,
                "operationId": "terminateUpload",
                "summary": "Abandon an upload (tus termination)",
                "description": "Its pieces are removed; the record of a finished upload stays.",
                "parameters": [TUS_RESUMABLE],
                "responses": {
                    "204": {"description": "Removed.", "headers": ALWAYS},
                    **_errors(401, 404, 410, 412, 500, 503),
                },
            },
        },
    )
