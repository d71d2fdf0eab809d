from __future__ import annotations

import base64
import binascii
import uuid
from email.utils import format_datetime

from flask import Response, current_app, request

from app.auth.guard import current_user, user_rate_key
from app.errors import error_response
from app.extensions import limiter
from app.models import ResumableUpload
from app.storage import Storage
from app.tus import bp, services

OFFSET_TYPE = "application/offset+octet-stream"


def _storage() -> Storage:
    return current_app.extensions["storage"]


def _upload_rate() -> str:
    return current_app.config["RATELIMIT_UPLOADS"]


@bp.errorhandler(services.TusError)
def _tus_error(exc: services.TusError) -> Response:
    return error_response(exc.status, exc.message)


@bp.before_request
def require_tus_version() -> Response | None:
    if request.method == "OPTIONS":
        return None
    if request.headers.get("Tus-Resumable") != services.TUS_VERSION:
        response = error_response(412, f"Send Tus-Resumable: {services.TUS_VERSION}.")
        response.headers["Tus-Version"] = services.TUS_VERSION
        return response
    return None


@bp.after_request
def tus_headers(response: Response) -> Response:
    response.headers["Tus-Resumable"] = services.TUS_VERSION
    response.headers["Cache-Control"] = "no-store"
    return response


def _whole_number(name: str) -> int:
    raw = request.headers.get(name, "")
    if not raw.isdigit() or len(raw) > 18:
        raise services.TusError(f"{name} must be a whole number of bytes.")
    return int(raw)


def _checksum() -> tuple[str, bytes] | None:
    raw = request.headers.get("Upload-Checksum")
    if raw is None:
        return None
    algorithm, _, encoded = raw.strip().partition(" ")
    if algorithm not in services.CHECKSUMS:
        raise services.UnsupportedChecksum(
            f"Upload-Checksum: use one of {', '.join(services.CHECKSUMS)}."
        )
    try:
        return algorithm, base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise services.TusError("Upload-Checksum: the checksum is not base64.") from None


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
        raise services.UnsupportedMediaType(f"Send the bytes as {OFFSET_TYPE}.")
    piece = services.Piece(request.stream, upload_id, _checksum())
    return services.append_piece(user, upload_id, offset, piece, _storage(), current_app.config)


@bp.route("", methods=["OPTIONS"], provide_automatic_options=False)
def discover():
    return Response(
        status=204,
        headers={
            "Tus-Version": services.TUS_VERSION,
            "Tus-Extension": services.EXTENSIONS,
            "Tus-Max-Size": str(current_app.config["MAX_FILE_SIZE"]),
            "Tus-Checksum-Algorithm": ",".join(services.CHECKSUMS),
        },
    )


@bp.route("", methods=["POST"], provide_automatic_options=False)
@limiter.limit(_upload_rate, key_func=user_rate_key)
def create_upload():
    user = current_user()
    if "Upload-Defer-Length" in request.headers:
        raise services.TusError("Upload-Defer-Length is not supported; send Upload-Length.")
    length = _whole_number("Upload-Length")
    upload = services.create_upload(
        user,
        length,
        request.headers.get("Upload-Metadata", ""),
        _storage(),
        current_app.config,
    )
    if request.mimetype == OFFSET_TYPE:  # Creation With Upload
        upload = _append(upload.id, 0).upload
    # Relative: never built from the request's Host header.
    headers = {**_state_headers(upload), "Location": f"{bp.url_prefix}/{upload.id}"}
    return Response(status=201, headers=headers)


@bp.route("/<uuid:upload_id>", methods=["HEAD"], provide_automatic_options=False)
def upload_state(upload_id: uuid.UUID):
    upload = services.find_upload(current_user(), upload_id)
    headers = _state_headers(upload)
    headers["Upload-Length"] = str(upload.length)
    if upload.upload_metadata:
        headers["Upload-Metadata"] = upload.upload_metadata
    return Response(status=200, headers=headers)


@bp.route("/<uuid:upload_id>", methods=["PATCH"], provide_automatic_options=False)
def append_to_upload(upload_id: uuid.UUID):
    current_user()
    offset = _whole_number("Upload-Offset")
    appended = _append(upload_id, offset)
    return Response(status=204, headers=_state_headers(appended.upload))


@bp.route("/<uuid:upload_id>", methods=["DELETE"], provide_automatic_options=False)
def terminate_upload(upload_id: uuid.UUID):
    services.terminate(current_user(), upload_id, _storage())
    return Response(status=204)
