from __future__ import annotations

import uuid

from flask import current_app, request

from app.files import access
from app.files.downloads import download_response
from app.files.listing import Listing
from app.files.pagination import list_response
from app.http import load
from app.public import bp
from app.schemas import public_record_rows
from app.search.schemas import SearchListQuerySchema

PUBLIC_CACHE = "public, max-age=0, must-revalidate"

# The release filter is not offered publicly: a `freigabe` parameter is ignored, never checked.
list_query_schema = SearchListQuerySchema(exclude=("freigabe",))


@bp.get("")
def list_released():
    params = load(list_query_schema, request.args.to_dict())
    return list_response(Listing.of(None, params), params, public_record_rows)


@bp.get("/<uuid:record_id>")
def read_released(record_id: uuid.UUID):
    return public_record_rows.dump(access.read_record(None, record_id))


@bp.get("/<uuid:record_id>/download")
def download_released(record_id: uuid.UUID):
    storage = current_app.extensions["storage"]
    return download_response(request, None, record_id, storage, PUBLIC_CACHE)
