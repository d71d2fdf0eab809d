"""The owner's side of a record's cover: read its state, upload a picture, remove it. The
public reads the pictures at /records/{id}/cover/... (app/pages/covers.py)."""

from __future__ import annotations

import uuid

from flask import current_app, request

from app.auth.guard import current_user, user_rate_key
from app.covers import services
from app.covers.schemas import CoversSchema
from app.docs.openapi import ID_PARAMETER, RATE_LIMIT_HEADERS, SERVER, Blueprint
from app.extensions import limiter

bp = Blueprint(
    "covers", __name__, url_prefix="/api/files", tag="Files", errors=("Unauthenticated", *SERVER)
)
covers_schema = CoversSchema()
IMAGE = {"schema": {"type": "string", "format": "binary"}}
BODY = {"required": True, "content": {name: IMAGE for name in services.OWNER_TYPES}}


def _upload_rate() -> str:
    return current_app.config["RATELIMIT_UPLOADS"]


@bp.get("/<uuid:record_id>/cover", parameters=[ID_PARAMETER])
@bp.doc(operationId="readFileCover")
@bp.alt_response(200, schema=CoversSchema, description="Its pictures.")
@bp.errors("NotFound")
def read_cover(record_id: uuid.UUID):
    """A record's cover pictures

    Owner or administrator: which picture it shows, and whether each is made, waiting or
    failed (a file no picture can be drawn of).
    """
    return covers_schema.dump(services.status(current_user(), record_id))


@bp.put("/<uuid:record_id>/cover", parameters=[ID_PARAMETER])
@limiter.limit(_upload_rate, key_func=user_rate_key)
@bp.doc(operationId="putFileCover", requestBody=BODY)
@bp.alt_response(202, schema=CoversSchema, description="Stored.", headers=RATE_LIMIT_HEADERS)
@bp.errors("NotFound", "Conflict", "PayloadTooLarge", "ValidationFailed", "TooManyRequests")
def put_cover(record_id: uuid.UUID):
    """Upload the record's cover

    The picture itself as the body (JPEG, PNG, GIF or WebP by its bytes, at most COVER_MAX_KB,
    else 422 on `cover`); it wins over the one drawn of the content, and its sizes are made
    after the answer. Rate limited with uploads. With RELEASE_APPROVAL on: 409 for a released
    record; a waiting release request is submitted again.
    """
    caller = current_user()
    services.upload(caller, record_id, request.stream, current_app.extensions["storage"])
    return covers_schema.dump(services.status(caller, record_id)), 202


@bp.delete("/<uuid:record_id>/cover", parameters=[ID_PARAMETER])
@bp.doc(operationId="deleteFileCover")
@bp.alt_response(204, description="Removed; the drawn one shows again.")
@bp.errors("NotFound", "Conflict")
def delete_cover(record_id: uuid.UUID):
    """Remove the owner's cover"""
    services.remove(current_user(), record_id, current_app.extensions["storage"])
    return "", 204
