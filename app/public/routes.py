from __future__ import annotations

import uuid
from typing import Any

from flask import Blueprint, current_app, request

from app.database import read_without_transaction
from app.docs.openapi import (
    DOWNLOAD_REQUEST_HEADERS,
    ID_PARAMETER,
    NO_TOKEN,
    download_responses,
    errors,
    json_content,
    openapi,
    public_cache,
    ref,
)
from app.files import access
from app.files.downloads import download_response
from app.files.listing import Listing
from app.files.pagination import list_response
from app.http import load
from app.schemas.fast_dump import public_record_rows
from app.search.schemas import SearchListQuerySchema

bp = Blueprint("public", __name__, url_prefix="/api/public/files")
bp.before_request(read_without_transaction)


PUBLIC_CACHE = "public, max-age=0, must-revalidate"

# The release filter is not offered publicly: a `freigabe` parameter is ignored, never checked.
list_query_schema = SearchListQuerySchema(exclude=("freigabe",))

TAGS = ["Public"]
CACHE = public_cache(PUBLIC_CACHE)
RECORD_ID = {
    "record_id": {
        **ID_PARAMETER,
        "description": "Unreleased, unknown and malformed ids are all 404.",
    }
}


def _ok(description: str, schema: str) -> dict[str, Any]:
    return {
        "description": description,
        "headers": {"Cache-Control": CACHE},
        "content": json_content(ref("schemas", schema)),
    }


@bp.get("")
@openapi(
    tags=TAGS,
    operationId="listReleasedFiles",
    summary="List released records",
    description="Released records only, newest first; a `freigabe` parameter is ignored.",
    security=NO_TOKEN,
    parameters=[{"in": "query", "schema": list_query_schema}],
    responses={
        "200": _ok("One page.", "PublicFileRecordPage"),
        **errors("ValidationFailed", "ServerError", "ServiceUnavailable", cache=CACHE),
    },
)
def list_released():
    params = load(list_query_schema, request.args.to_dict())
    return list_response(Listing.of(None, params), params, public_record_rows)


@bp.get("/<uuid:record_id>")
@openapi(
    path_parameters=RECORD_ID,
    tags=TAGS,
    operationId="readReleasedFile",
    summary="Read one released record",
    description="An embargo does not hide the metadata.",
    security=NO_TOKEN,
    responses={
        "200": _ok("The record.", "PublicFileRecord"),
        **errors("NotFound", "ServerError", "ServiceUnavailable", cache=CACHE),
    },
)
def read_released(record_id: uuid.UUID):
    return public_record_rows.dump(access.read_record(None, record_id))


@bp.get("/<uuid:record_id>/download")
@openapi(
    path_parameters=RECORD_ID,
    tags=TAGS,
    operationId="downloadReleasedFile",
    summary="Download released content",
    description="403 while the record is under embargo.",
    security=NO_TOKEN,
    parameters=DOWNLOAD_REQUEST_HEADERS,
    responses={
        **download_responses(CACHE),
        **errors("Forbidden", "NotFound", "ServerError", "ServiceUnavailable", cache=CACHE),
    },
)
def download_released(record_id: uuid.UUID):
    storage = current_app.extensions["storage"]
    return download_response(request, None, record_id, storage, PUBLIC_CACHE)
