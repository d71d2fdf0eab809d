"""Reading the statistics: a record's (owner and administrators), the ranking (administrators),
a released record's totals (the public, unless `STATS_PUBLIC` is off)."""

from __future__ import annotations

import math
import uuid

from flask import current_app, request

from app.auth.guard import current_user
from app.database import read_without_transaction
from app.docs.openapi import CACHED, ID_PARAMETER, NO_TOKEN, SERVER, Blueprint, in_query
from app.exceptions import AdministratorsOnly, RecordNotFound
from app.files import access
from app.http import load
from app.stats import queries
from app.stats.schemas import (
    RankedPageSchema,
    RankedStatsQuery,
    RecordStatsQuery,
    RecordStatsSchema,
    RecordTotalsSchema,
)

bp = Blueprint("stats", __name__, tag="Statistics")
bp.before_request(read_without_transaction)

record_query = RecordStatsQuery()
ranked_query = RankedStatsQuery()
record_stats_schema = RecordStatsSchema()
totals_schema = RecordTotalsSchema()
page_schema = RankedPageSchema()


@bp.get("/api/files/<uuid:record_id>/stats", parameters=[ID_PARAMETER])
@bp.doc(operationId="getFileStats", parameters=in_query(record_query))
@bp.alt_response(200, schema=RecordStatsSchema, description="Totals and one row per period.")
@bp.errors("Unauthenticated", "NotFound", "ValidationFailed", *SERVER)
def record_stats(record_id: uuid.UUID):
    """A record's downloads

    Counted downloads (COUNTER R5 rules) over a period, totals and one row per day or month,
    for the owner and administrators (others: 404, as for the record).
    """
    access.read_record(current_user(), record_id)
    params = load(record_query, request.args.to_dict())
    return record_stats_schema.dump(
        queries.record_stats(record_id, params["from"], params["until"], params["granularity"])
    )


@bp.get("/api/stats")
@bp.doc(operationId="listStats", parameters=in_query(ranked_query))
@bp.alt_response(200, schema=RankedPageSchema, description="One page.")
@bp.errors("Unauthenticated", "AdministratorsOnly", "ValidationFailed", *SERVER)
def ranked_stats():
    """Downloads per record

    Records with counted downloads in the period, most used first (`sort`), 100 a page;
    administrators only.
    """
    if not current_user().is_admin:
        raise AdministratorsOnly("Only administrators may read the statistics of all records.")
    params = load(ranked_query, request.args.to_dict())
    per_page = current_app.config["PAGE_SIZE"]
    rows, count = queries.ranked_records(
        params["from"],
        params["until"],
        params.get("path"),
        params["sort"],
        params["page"],
        per_page,
    )
    return page_schema.dump(
        {
            "data": rows,
            "current_page": params["page"],
            "per_page": per_page,
            "total": count,
            "last_page": max(1, math.ceil(count / per_page)),
        }
    )


@bp.get("/api/public/files/<uuid:record_id>/stats", parameters=[ID_PARAMETER], tags=["Public"])
@bp.doc(operationId="getReleasedFileStats", security=NO_TOKEN)
@bp.alt_response(200, schema=RecordTotalsSchema, description="The totals.", headers=CACHED)
@bp.errors("NotFound", *SERVER, headers=CACHED)
def public_stats(record_id: uuid.UUID):
    """A released record's downloads

    The public figures of a released record: downloads without a token (`public` door) and
    views of its landing page. Share-link and account downloads are not in them, before or
    after the release: the press may fetch content under embargo, and how often is its
    owner's to know (`GET /api/files/{id}/stats`). 404 when the operator has switched public
    statistics off (`STATS_PUBLIC`), and while the record is under embargo.
    """
    if current_app.config["STATS_PUBLIC"] != "on":
        raise RecordNotFound()
    if access.embargo_active(access.read_record(None, record_id), access.today()):
        raise RecordNotFound()
    return totals_schema.dump(queries.record_totals(record_id))
