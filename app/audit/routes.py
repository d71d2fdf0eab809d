"""The audit trail over HTTP: all of it for administrators, one record's history for whoever
may see the record."""

from __future__ import annotations

import uuid
from typing import Any

from flask import current_app, request

from app.audit import services
from app.audit.schemas import AuditPageSchema, AuditQuerySchema, HistoryQuerySchema, HistorySchema
from app.auth.guard import current_user
from app.database import read_without_transaction
from app.docs.openapi import ID_PARAMETER, SERVER, Blueprint, in_query
from app.exceptions import AdministratorsOnly
from app.extensions import db
from app.files import access
from app.files.pagination import url_with
from app.http import external_url, load

bp = Blueprint("audit", __name__, tag="Audit", errors=("Unauthenticated", *SERVER))
bp.before_request(read_without_transaction)

query_schema = AuditQuerySchema()
history_query = HistoryQuerySchema()


@bp.get("/api/audit")
@bp.doc(operationId="listAuditEntries", parameters=in_query(query_schema))
@bp.alt_response(200, schema=AuditPageSchema, description="One page, newest first.")
@bp.errors("AdministratorsOnly", "ValidationFailed")
def list_entries():
    """The audit trail

    Every change, newest first, 100 a page (`cursor=`, then each `next_cursor`); administrators
    only. Deleted records' histories stay here (`record_id`).
    """
    if not current_user().is_admin:
        raise AdministratorsOnly("Only administrators may read the audit trail.")
    params = load(query_schema, request.args.to_dict())
    per_page = current_app.config["PAGE_SIZE"]
    filters = services.Filters(
        **{name: params.get(name) for name in ("record_id", "actor", "action", "since", "until")}
    )
    entries, next_seq = services.newest_first(db.session, filters, params.get("cursor"), per_page)
    return _page(entries, next_seq, per_page)


def _page(entries: list[Any], next_seq: int | None, per_page: int) -> dict[str, Any]:
    next_cursor = str(next_seq) if next_seq is not None else None
    return {
        "data": [services.as_dict(entry) for entry in entries],
        "path": external_url(request.script_root + request.path),
        "per_page": per_page,
        "next_cursor": next_cursor,
        "next_page_url": url_with("cursor", next_cursor) if next_cursor else None,
    }


@bp.get("/api/files/<uuid:record_id>/history", parameters=[ID_PARAMETER])
@bp.doc(operationId="getFileHistory", parameters=in_query(history_query))
@bp.alt_response(200, schema=HistorySchema, description="One page of the record's entries.")
@bp.errors("NotFound", "ValidationFailed")
def record_history(record_id: uuid.UUID):
    """A record's history

    The audit entries of one record, oldest first, 100 a page (`cursor=`, then each
    `next_cursor`), for its owner and administrators (others: 404, as for the record).
    """
    access.find_record(current_user(), record_id)
    params = load(history_query, request.args.to_dict())
    per_page = current_app.config["PAGE_SIZE"]
    entries, next_seq = services.history(db.session, record_id, params.get("cursor"), per_page)
    return _page(entries, next_seq, per_page)
