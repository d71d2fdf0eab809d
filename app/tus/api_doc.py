"""The pieces of the tus operations in the OpenAPI document: their headers, errors and the
Uploads tag; each operation is declared beside its view in app/tus/routes.py."""

from __future__ import annotations

from typing import Any

from app.docs.openapi import ERROR_RESPONSES, SERVER, const, error, header, header_parameter
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


def _with_always(response: dict[str, Any]) -> dict[str, Any]:
    return response | {"headers": response.get("headers", {}) | ALWAYS}


ERRORS = {
    status: _with_always(error(text))
    for status, text in {
        400: "A header is missing or malformed (`Upload-Length`, `Upload-Offset`, "
        "`Upload-Metadata`, `Upload-Checksum`), or `Upload-Defer-Length` was sent.",
        404: "No such upload of yours (other users' uploads are 404 too).",
        409: "`Upload-Offset` is not the upload's offset (ask with HEAD).",
        410: "The upload has expired.",
        413: "`Upload-Length` is over `Tus-Max-Size`, or the body goes beyond `Upload-Length`.",
        415: "The body is not `application/offset+octet-stream`.",
        460: "`Upload-Checksum` does not match the body; nothing was kept.",
    }.items()
} | {
    status: _with_always(response)
    for name in ("Unauthenticated", "ValidationFailed", "TooManyRequests", *SERVER)
    for status, response in [ERROR_RESPONSES[name]]
}
ERRORS[412] = error(
    "`Tus-Resumable` is missing or not 1.0.0.", **{"Tus-Version": header("Versions spoken.")}
)


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
