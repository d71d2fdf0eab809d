from __future__ import annotations

import base64
import binascii
import re
import uuid
from collections.abc import Mapping
from email.utils import format_datetime

from flask import Response, current_app, request
from flask.blueprints import BlueprintSetupState

from app.auth.guard import caller_of, current_user, user_rate_key
from app.docs.openapi import NO_TOKEN, Blueprint
from app.errors import error_response
from app.exceptions import RecordNotFound
from app.extensions import limiter
from app.models import ResumableUpload
from app.storage import Storage
from app.tus import protocol, services
from app.tus.api_doc import (
    ALWAYS,
    BYTES,
    CHECKSUM,
    STATE,
    TUS_RESUMABLE,
    UPLOAD_ID,
    WHOLE_NUMBER,
    errors,
    header,
    header_parameter,
    without_body,
)
from app.tus.copying import spooled_body
from app.tus.override import HEADER, PREFIX, effective_method, under_prefix
from app.tus.pieces import Piece

bp = Blueprint("tus", __name__, url_prefix=PREFIX, tag="Uploads")


@bp.record_once
def _check_pieces_before_their_body(state: BlueprintSetupState) -> None:
    """The server asks before it receives a large body (app/server.py)."""
    state.app.extensions.setdefault("body_checks", []).append(refuse_before_body)
    state.app.extensions.setdefault("server_answer_headers", []).append(server_answer_headers)


def server_answer_headers(path: str) -> dict[str, str]:
    """For the server's own answers (app/server.py: a body over the limit, broken framing, no
    token for a large body, a full spool): under the prefix, what every tus answer carries."""
    if under_prefix(path):
        return {"Tus-Resumable": protocol.TUS_VERSION, "Cache-Control": "no-store"}
    return {}


OFFSET_TYPE = "application/offset+octet-stream"


def _storage() -> Storage:
    return current_app.extensions["storage"]


def _upload_rate() -> str:
    return current_app.config["RATELIMIT_UPLOADS"]


@bp.before_request
def require_tus_version() -> Response | None:
    if request.method == "OPTIONS":
        return None
    if request.headers.get("Tus-Resumable") != protocol.TUS_VERSION:
        response = error_response(412, f"Send Tus-Resumable: {protocol.TUS_VERSION}.")
        response.headers["Tus-Version"] = protocol.TUS_VERSION
        return response
    return None


@bp.after_app_request
def tus_headers(response: Response) -> Response:
    """On every answer under the prefix, the routing's 404 and 405 (no view of this
    blueprint) included: the version, and no cache keeps an upload's state."""
    if under_prefix(request.path):
        response.headers["Tus-Resumable"] = protocol.TUS_VERSION
        response.headers["Cache-Control"] = "no-store"
    return response


def _without_body(status: int, headers: dict[str, str] | None = None) -> Response:
    """An answer with no body has no type either (Flask would label it text/html)."""
    response = Response(status=status, headers=headers)
    response.headers.pop("Content-Type", None)
    return response


def _whole_number(name: str) -> int:
    return protocol.whole_number(name, request.headers.get(name))


def _checksum() -> tuple[str, bytes] | None:
    raw = request.headers.get("Upload-Checksum")
    if raw is None:
        return None
    algorithm, _, encoded = raw.strip().partition(" ")
    if algorithm not in protocol.CHECKSUMS:
        raise protocol.UnsupportedChecksum(
            f"Upload-Checksum: use one of {', '.join(protocol.CHECKSUMS)}."
        )
    try:
        return algorithm, base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise protocol.TusError("Upload-Checksum: the checksum is not base64.") from None


def _waitress_name(name: str) -> str:
    return name.upper().replace("-", "_")


PIECE_PATH = re.compile(rf"{bp.url_prefix}/([0-9a-fA-F-]{{32,36}})")


def refuse_before_body(
    method: str, path: str, headers: Mapping[str, str]
) -> tuple[int, str, dict[str, str]] | None:
    """For the server, before it receives a large body (app/server.py; waitress's header
    names): a PATCH for no upload of the caller's, at the wrong offset or longer than the
    room left is answered at once; anything else goes on to the view."""
    match = PIECE_PATH.fullmatch(path)
    method = effective_method(method, path, headers.get(_waitress_name(HEADER)))
    if method != "PATCH" or match is None:
        return None
    mimetype = headers.get("CONTENT_TYPE", "").partition(";")[0].strip().lower()
    if headers.get("TUS_RESUMABLE") != protocol.TUS_VERSION or mimetype != OFFSET_TYPE:
        return None  # the view's 412 or 415 come first
    caller = caller_of(headers.get("AUTHORIZATION", ""))
    if caller is None:
        return None
    always = {"Tus-Resumable": protocol.TUS_VERSION, "Cache-Control": "no-store"}
    try:
        upload_id = uuid.UUID(match[1])
        offset = protocol.whole_number("Upload-Offset", headers.get("UPLOAD_OFFSET"))
        length = headers.get("CONTENT_LENGTH")  # none when chunked
        size = None if length is None else protocol.whole_number("Content-Length", length)
        services.check_piece(caller, upload_id, offset, size)
    except ValueError:  # not an upload id: the view's 404
        return None
    except RecordNotFound as exc:
        return 404, exc.message, always
    except protocol.TusError as exc:
        return exc.status, exc.message, {**always, **exc.headers}
    return None


def _state_headers(upload: ResumableUpload) -> dict[str, str]:
    headers = {
        "Upload-Offset": str(upload.offset),
        "Upload-Expires": format_datetime(upload.expires_at, usegmt=True),
    }
    if upload.completed_at is not None:
        headers["Upload-Record-Id"] = str(upload.record_id)
        headers["Location"] = f"/api/files/{upload.record_id}"
    return headers


def _append(upload_id: uuid.UUID, offset: int) -> services.Appended:
    user = current_user()
    if request.mimetype != OFFSET_TYPE:
        raise protocol.UnsupportedMediaType(f"Send the bytes as {OFFSET_TYPE}.")
    piece = Piece(
        request.stream,
        upload_id,
        _checksum(),
        spooled_body(request.environ),
        announced=request.content_length,
    )
    return services.append_piece(user, upload_id, offset, piece, _storage(), current_app.config)


#: What an OPTIONS answers (tus "Discovery"), wherever under the prefix it is asked.
DISCOVERY = {
    "204": {
        "description": "The protocol's discovery headers.",
        "headers": {
            "Tus-Version": header("Versions spoken.", {"const": services.TUS_VERSION}),
            "Tus-Extension": header(
                "Extensions.", {"type": "string", "const": services.EXTENSIONS}
            ),
            "Tus-Max-Size": header(
                "Largest upload, in bytes.", {"type": "string", "pattern": "^[0-9]+$"}
            ),
            "Tus-Checksum-Algorithm": header(
                "Checksums of `Upload-Checksum`.",
                {"type": "string", "const": ",".join(services.CHECKSUMS)},
            ),
        },
    }
}


@bp.route("", methods=["OPTIONS"], provide_automatic_options=False)
@bp.doc(operationId="discoverUploads", security=NO_TOKEN, responses=DISCOVERY)
def discover():
    """What this tus server speaks"""
    return _discovery()


@bp.route(
    "/<uuid:upload_id>",
    parameters=[UPLOAD_ID],
    methods=["OPTIONS"],
    provide_automatic_options=False,
)
@bp.doc(operationId="discoverUploadsAtAnUpload", security=NO_TOKEN, responses=DISCOVERY)
def discover_at_upload(upload_id: uuid.UUID):
    """What this tus server speaks, asked at an upload's address

    The same answer as `OPTIONS /api/uploads`, whoever asks and whether the upload exists."""
    return _discovery()


def _discovery() -> Response:
    return _without_body(
        204,
        {
            "Tus-Version": protocol.TUS_VERSION,
            "Tus-Extension": protocol.EXTENSIONS,
            "Tus-Max-Size": str(current_app.config["MAX_FILE_SIZE"]),
            "Tus-Checksum-Algorithm": ",".join(protocol.CHECKSUMS),
        },
    )


@bp.route("", methods=["POST"], provide_automatic_options=False)
@limiter.limit(_upload_rate, key_func=user_rate_key)
@bp.doc(
    operationId="createUpload",
    parameters=[
        TUS_RESUMABLE,
        header_parameter(
            "Upload-Length", "Size of the whole file in bytes.", WHOLE_NUMBER, required=True
        ),
        header_parameter(
            "Upload-Metadata", "`key base64(value)` pairs separated by commas.", {"type": "string"}
        ),
        CHECKSUM,
    ],
    requestBody={"required": False, "content": BYTES},
    responses={
        "201": {
            "description": "Created; `Location` is the upload's URL (relative).",
            "headers": {**STATE, "Location": header("The upload, `/api/uploads/{id}`.")},
        },
        **errors(400, 401, 409, 412, 413, 415, 422, 429, 460, 500, 503),
    },
)
def create_upload():
    """Start a resumable upload (tus creation)

    At most {max_file_size:,} bytes (`Upload-Length`). `Upload-Metadata` carries `filename` (or
    `name`) and the metadata fields of `POST /api/files` (`titel`, `path`, `sperrfrist`,
    `freigabe`, ...), base64-encoded as tus says; they are checked with the same rules and
    messages (422) before any byte is accepted. With a body (creation with upload) its bytes
    are the first piece. Rate limited per user (with uploads). When the last byte is in, the
    file goes through the type detection, size limit and record creation of `POST /api/files`:
    the answer carries `Upload-Record-Id` and the record's `Location`, or a 422 on `file`
    (type) with nothing stored.
    """
    user = current_user()
    if "Upload-Defer-Length" in request.headers:
        raise protocol.TusError("Upload-Defer-Length is not supported; send Upload-Length.")
    length = _whole_number("Upload-Length")
    upload = services.create_upload(
        user,
        length,
        request.headers.get("Upload-Metadata", ""),
        _storage(),
        current_app.config,
    )
    if request.mimetype == OFFSET_TYPE:  # Creation With Upload
        upload_id = upload.id
        try:
            upload = _append(upload_id, 0).upload
        except BaseException:
            # The client never learns this upload's location: nothing of it may stay.
            services.discard_new(upload_id, _storage())
            raise
    # Relative: never built from the request's Host header.
    headers = {**_state_headers(upload), "Location": f"{bp.url_prefix}/{upload.id}"}
    return _without_body(201, headers)


@bp.route(
    "/<uuid:upload_id>", parameters=[UPLOAD_ID], methods=["HEAD"], provide_automatic_options=False
)
@bp.doc(
    operationId="readUpload",
    parameters=[TUS_RESUMABLE],
    responses={
        "200": {
            "description": "The upload's offset, length and metadata.",
            "headers": {
                **STATE,
                "Upload-Length": header("Size of the whole file.", WHOLE_NUMBER),
                "Upload-Metadata": header("As sent at creation.", required=False),
            },
        },
        **without_body(errors(401, 404, 410, 412, 500, 503)),
    },
)
def upload_state(upload_id: uuid.UUID):
    """How far an upload got"""
    upload = services.find_upload(current_user(), upload_id)
    headers = _state_headers(upload)
    headers["Upload-Length"] = str(upload.length)
    if upload.upload_metadata:
        headers["Upload-Metadata"] = upload.upload_metadata
    return _without_body(200, headers)


@bp.route(
    "/<uuid:upload_id>", parameters=[UPLOAD_ID], methods=["PATCH"], provide_automatic_options=False
)
@bp.doc(
    operationId="appendToUpload",
    parameters=[
        TUS_RESUMABLE,
        header_parameter("Upload-Offset", "Where this piece starts.", WHOLE_NUMBER, required=True),
        CHECKSUM,
    ],
    requestBody={"required": True, "content": BYTES},
    responses={
        "204": {
            "description": "Kept; `Upload-Offset` is the new offset.",
            "headers": {
                **STATE,
                "Location": header(
                    "After the last piece: the new record, `/api/files/{id}`.", required=False
                ),
            },
        },
        **errors(400, 401, 404, 409, 410, 412, 413, 415, 422, 460, 500, 503),
    },
)
def append_to_upload(upload_id: uuid.UUID):
    """Send the next piece

    The body is taken whole or not at all: a piece cut off by a dropped connection is not kept,
    so the client resends from the offset. When the last byte is in, the file goes through the
    type detection, size limit and record creation of `POST /api/files`: the answer carries
    `Upload-Record-Id` and the record's `Location`, or a 422 on `file` (type) with nothing
    stored.
    """
    current_user()
    offset = _whole_number("Upload-Offset")
    appended = _append(upload_id, offset)
    return _without_body(204, _state_headers(appended.upload))


@bp.route(
    "/<uuid:upload_id>", parameters=[UPLOAD_ID], methods=["DELETE"], provide_automatic_options=False
)
@bp.doc(
    operationId="terminateUpload",
    parameters=[TUS_RESUMABLE],
    responses={
        "204": {"description": "Removed.", "headers": ALWAYS},
        **errors(401, 404, 410, 412, 500, 503),
    },
)
def terminate_upload(upload_id: uuid.UUID):
    """Abandon an upload (tus termination)

    Its pieces are removed; the record of a finished upload stays.
    """
    services.terminate(current_user(), upload_id, _storage())
    return _without_body(204)
