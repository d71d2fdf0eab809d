"""Release requests over HTTP (issue 38): submit a record, approve, decline, cancel, list."""

from __future__ import annotations

import uuid
from typing import Any

from flask import current_app, request

from app.auth.guard import current_user, user_rate_key
from app.docs.openapi import (
    BODY_ERRORS,
    DOWNLOAD_REQUEST_HEADERS,
    ID_PARAMETER,
    RATE_LIMIT_HEADERS,
    SERVER,
    Blueprint,
    download_responses,
    json_body_doc,
    private_cache,
)
from app.extensions import limiter
from app.files.downloads import stored_file_response
from app.files.pagination import url_with
from app.http import PRIVATE_CACHE, json_body, load
from app.releases import services
from app.releases.schemas import (
    ApproveSchema,
    CancelSchema,
    DeclineSchema,
    ReleaseRequestListSchema,
    ReleaseRequestSchema,
    RequestQuerySchema,
    SubmitSchema,
)
from app.schemas.cursor import encode_cursor
from app.storage import Storage

bp = Blueprint("releases", __name__, tag="Release approval", errors=("Unauthenticated", *SERVER))

submit_schema = SubmitSchema()
approve_schema = ApproveSchema()
decline_schema = DeclineSchema()
cancel_schema = CancelSchema()
query_schema = RequestQuerySchema()
request_schema = ReleaseRequestSchema()

DECISION_ERRORS = (*BODY_ERRORS, "ApprovalRefused", "NotFound", "Conflict", "TooManyRequests")
REQUEST_ID = {
    "name": "request_id",
    "in": "path",
    "required": True,
    "description": "The release request's id.",
    "schema": {"type": "string", "format": "uuid"},
}


def _storage() -> Storage:
    return current_app.extensions["storage"]


#: Every move of a release request (each may mail the approvers or the submitter) counts
#: against one per-user limit, the writes' rate (RATELIMIT_WRITES).
moves_limited = limiter.shared_limit(
    lambda: current_app.config["RATELIMIT_WRITES"], scope="release-requests", key_func=user_rate_key
)


def _one(release_request: Any) -> dict[str, Any]:
    [described] = services.describe([release_request])
    return request_schema.dump(described)


@bp.post("/api/files/<uuid:record_id>/release-requests", parameters=[ID_PARAMETER])
@moves_limited
@bp.doc(operationId="submitForRelease", requestBody=json_body_doc(submit_schema))
@bp.alt_response(
    201, schema=ReleaseRequestSchema, description="The pending request.", headers=RATE_LIMIT_HEADERS
)
@bp.errors(*BODY_ERRORS, "NotFound", "Conflict", "TooManyRequests")
def submit(record_id: uuid.UUID):
    """Submit a record for release

    Owner or administrator, with `RELEASE_APPROVAL=on`; bound to the record as it is now.
    409 when the setting is off, the record is released already or has a pending request.
    """
    caller = current_user()
    data = load(submit_schema, json_body())
    return _one(services.submit(caller, record_id, data.get("note"))), 201


@bp.get("/api/release-requests")
@bp.doc(operationId="listReleaseRequests", parameters=[{"in": "query", "schema": query_schema}])
@bp.alt_response(
    200, schema=ReleaseRequestListSchema, description="Newest first, one page of them."
)
@bp.errors("ValidationFailed")
def list_requests():
    """List release requests

    Approvers and administrators see all; others the requests they submitted and those of
    their records. `state=pending` is the approvers' queue. PAGE_SIZE a page, newest first;
    `next_cursor` (sent back as `cursor`) continues, null on the last page.
    """
    caller = current_user()
    params = load(query_schema, request.args.to_dict())
    found, next_position = services.list_requests(
        caller,
        params.get("state"),
        params.get("record_id"),
        params.get("cursor"),
        current_app.config["PAGE_SIZE"],
    )
    next_cursor = encode_cursor(next_position) if next_position else None
    return {
        "data": request_schema.dump(services.describe(found), many=True),
        "next_cursor": next_cursor,
        "next_page_url": url_with("cursor", next_cursor) if next_cursor else None,
    }


@bp.get("/api/release-requests/<uuid:request_id>", parameters=[REQUEST_ID])
@bp.doc(operationId="readReleaseRequest")
@bp.alt_response(200, schema=ReleaseRequestSchema, description="The request.")
@bp.errors("NotFound")
def read_request(request_id: uuid.UUID):
    """Read a release request

    With what changed, if a change cancelled it, and the record as it is now.
    """
    return _one(services.get_request(current_user(), request_id))


@bp.get("/api/release-requests/<uuid:request_id>/content", parameters=[REQUEST_ID])
@bp.doc(
    operationId="reviewReleaseContent",
    parameters=DOWNLOAD_REQUEST_HEADERS,
    responses=download_responses(private_cache(PRIVATE_CACHE)),
)
@bp.errors("ApprovalRefused", "NotFound", "Conflict")
def review_content(request_id: uuid.UUID):
    """Download the content of a pending request

    Approvers only: exactly the content the request is bound to (its SHA-256 is the ETag):
    of a `change` request with new content, the new bytes waiting beside the released ones;
    else the record's, 409 once it changed.
    """
    content = services.content_to_review(current_user(), request_id)
    return stored_file_response(request, content, _storage(), PRIVATE_CACHE)


@bp.post("/api/release-requests/<uuid:request_id>/approve", parameters=[REQUEST_ID])
@moves_limited
@bp.doc(operationId="approveRelease", requestBody=json_body_doc(approve_schema))
@bp.alt_response(
    200,
    schema=ReleaseRequestSchema,
    description="Approved; the record released.",
    headers=RATE_LIMIT_HEADERS,
)
@bp.errors(*DECISION_ERRORS)
def approve(request_id: uuid.UUID):
    """Approve a release request

    Approvers only, never the record's owner, the submitter or an editor since its last
    approval (403; an administrator may override with `override_reason`). Releases the record
    exactly as the request is bound to, a change's draft put in place; 409 (the request
    cancelled) once the record is no longer that, or while RELEASE_APPROVAL is off.
    """
    caller = current_user()
    data = load(approve_schema, json_body())
    approved = services.approve(caller, request_id, data.get("override_reason"), _storage())
    return _one(approved)


@bp.post("/api/release-requests/<uuid:request_id>/decline", parameters=[REQUEST_ID])
@moves_limited
@bp.doc(operationId="declineRelease", requestBody=json_body_doc(decline_schema))
@bp.alt_response(
    200, schema=ReleaseRequestSchema, description="Declined.", headers=RATE_LIMIT_HEADERS
)
@bp.errors(*DECISION_ERRORS)
def decline(request_id: uuid.UUID):
    """Decline a release request

    Approvers only, with a reason, which the submitter gets by email. A change waiting
    beside a released record is dropped (its new bytes deleted); the record stays as approved.
    """
    caller = current_user()
    data = load(decline_schema, json_body())
    return _one(services.decline(caller, request_id, data["reason"], _storage()))


@bp.post("/api/release-requests/<uuid:request_id>/cancel", parameters=[REQUEST_ID])
@moves_limited
@bp.doc(operationId="cancelRelease", requestBody=json_body_doc(cancel_schema))
@bp.alt_response(
    200, schema=ReleaseRequestSchema, description="Cancelled.", headers=RATE_LIMIT_HEADERS
)
@bp.errors(*BODY_ERRORS, "NotFound", "Conflict", "TooManyRequests")
def cancel(request_id: uuid.UUID):
    """Withdraw a pending release request

    Its submitter, the record's owner or an administrator.
    """
    caller = current_user()
    data = load(cancel_schema, json_body())
    return _one(services.cancel(caller, request_id, data.get("reason"), _storage()))
