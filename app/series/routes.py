from __future__ import annotations

from typing import Any

from flask import request

from app.auth.guard import current_user
from app.docs.openapi import BODY_ERRORS, SERVER, Blueprint, json_body_doc
from app.http import external_url, json_body, load
from app.models import Series
from app.series import services
from app.series.schemas import NewSeriesSchema, SeriesListSchema, SeriesSchema

bp = Blueprint(
    "series", __name__, url_prefix="/api/series", tag="Series", errors=("Unauthenticated", *SERVER)
)
new_series = NewSeriesSchema()


def _shown(series: Series) -> dict[str, Any]:
    return {
        "slug": series.slug,
        "title": series.title,
        "description": series.description,
        "created_at": series.created_at,
        "page": external_url(f"{request.script_root}/series/{series.slug}"),
        "feed": external_url(
            f"{request.script_root}/api/public/feed.atom", [("series", series.slug)]
        ),
        "oai_set": services.set_spec(series.slug),
    }


@bp.post("")
@bp.doc(operationId="createSeries", requestBody=json_body_doc(NewSeriesSchema))
@bp.alt_response(201, schema=SeriesSchema, description="The series.")
@bp.errors(*BODY_ERRORS, "AdministratorsOnly", "Conflict")
def create_series():
    """Make a series

    Administrators only. A record joins it with `series: {"slug", "number"}`.
    """
    series = services.create(current_user(), load(new_series, json_body()))
    return SeriesSchema().dump(_shown(series)), 201


@bp.get("")
@bp.doc(operationId="listSeries")
@bp.alt_response(200, schema=SeriesListSchema, description="Every series, by title.")
def list_series():
    """List the series"""
    current_user()
    return {"data": SeriesSchema(many=True).dump([_shown(s) for s in services.all_series()])}
