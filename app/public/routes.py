from __future__ import annotations

import uuid
from typing import Any

from flask import current_app, request
from sqlalchemy import Row

from app.downloads import download_response
from app.files import services
from app.http import load
from app.pagination import list_response
from app.public import bp
from app.schemas import public_record_rows
from app.search.schemas import SearchListQuerySchema

PUBLIC_CACHE = "public, max-age=0, must-revalidate"

# The release filter is not offered publicly: a `freigabe` parameter is ignored, never checked.
list_query_schema = SearchListQuerySchema(exclude=("freigabe",))


@bp.get("")
def list_released():
    params = load(list_query_schema, request.args.to_dict())
    return list_response(services.Listing.of(None, params), params, public_record_rows)


@bp.get("/<uuid:record_id>")
def read_released(record_id: uuid.UUID):
    return public_record_rows.dump(services.read_record(None, record_id))


@bp.get("/<uuid:record_id>/download")
def download_released(record_id: uuid.UUID):
    def load() -> Row[Any]:
        record = services.read_record(None, record_id)
        services.ensure_downloadable(
            record, is_admin=False, today=services.today_in(current_app.config["APP_TIMEZONE"])
        )
        return record

    return download_response(request, load, current_app.extensions["storage"], PUBLIC_CACHE)
