"""The pieces of the tus operations in the OpenAPI document: their headers, errors and the
Uploads tag; each operation is declared beside its view in app/tus/routes.py."""

from __future__ import annotations

from typing import Any

from app.docs.openapi import ERROR_RESPONSES, const, error, header, header_parameter
from app.tus import services

VERSION = const(services.TUS_VERSION)
TUS_RESUMABLE = header_parameter(
    "Tus-Resumable", "The protocol version; anything else answers 412.", VERSION, True
)
WHOLE_NUMBER = {"type": "string", "pattern": "^[0-9]{1,18}$"}
UPLOAD_ID = {
    "name": "id",
    "in": "path",
    "required": True,
    "description": "The upload, as the `Location` of its creation names it.",
    "schema": {"type": "string", "format": "uuid"},
}
BYTES = {"application/offset+octet-stream": {"schema": {"type": "string", "format": "binary"}}}


ALWAYS = {
    "Tus-Resumable": header("The protocol version.", VERSION),
    "Cache-Control": header("Upload state is never cached.", const("no-store")),
}
STATE = {
    **ALWAYS,
    "Upload-Offset": header("Bytes received so far.", WHOLE_NUMBER),
    "Upload-Expires": header(
        "When an unfinished upload is removed (RFC 9110 date); every accepted piece moves it on."
    ),
    "Upload-Record-Id": header("Once the last byte is in: the id of the new record.", None, False),
}


def _tus_error(status_description: str) -> dict[str, Any]:
    response = error(status_description)
    response["headers"] = dict(ALWAYS)
    return response


def _with_always(response: dict[str, Any]) -> dict[str, Any]:
    response = {**response}
    response["headers"] = {**response.get("headers", {}), **ALWAYS}
    return response


ERRORS = {
    400: _tus_error(
        "A header is missing or malformed (`Upload-Length`, `Upload-Offset`, "
        "`Upload-Metadata`, `Upload-Checksum`), or `Upload-Defer-Length` was sent."
    ),
    401: _with_always(ERROR_RESPONSES["Unauthenticated"][1]),
    404: _tus_error("No such upload of yours (other users' uploads are 404 too)."),
    409: _tus_error("`Upload-Offset` is not the upload's offset (ask with HEAD)."),
    410: _tus_error("The upload has expired."),
    412: error(
        "`Tus-Resumable` is missing or not 1.0.0.", **{"Tus-Version": header("Versions spoken.")}
    ),
    413: _tus_error(
        "`Upload-Length` is over `Tus-Max-Size`, or the body goes beyond `Upload-Length`."
    ),
    415: _tus_error("The body is not `application/offset+octet-stream`."),
    422: _with_always(ERROR_RESPONSES["ValidationFailed"][1]),
    429: _with_always(ERROR_RESPONSES["TooManyRequests"][1]),
    460: _tus_error("`Upload-Checksum` does not match the body; nothing was kept."),
    500: _with_always(ERROR_RESPONSES["ServerError"][1]),
    503: _with_always(ERROR_RESPONSES["ServiceUnavailable"][1]),
}


def errors(*statuses: int) -> dict[str, Any]:
    """The tus error answers by status: every one carries the protocol's headers."""
    return {str(status): ERRORS[status] for status in statuses}


def without_body(responses: dict[str, Any]) -> dict[str, Any]:
    """Answers to HEAD: the same statuses and headers, never a body."""
    return {
        status: {k: v for k, v in response.items() if k != "content"}
        for status, response in responses.items()
    }


CHECKSUM = header_parameter(
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
