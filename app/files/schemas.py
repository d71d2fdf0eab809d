"""What record answers tell of the release rule (app/files/approval.py), with
`RELEASE_APPROVAL=on` only: the record's pending release request and what its change sets.
The release requests' own answers (app/releases/schemas.py) show `pending` with these."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from app.models import RequestKind, RequestState
from app.schemas.field_types import CalendarDate


class PendingContentSchema(Schema):
    class Meta:
        description = (
            "The new content (an approver downloads it at `/api/release-requests/{id}/content`)."
        )

    sha256 = fields.String(required=True)
    size = fields.Integer(required=True)
    mime_type = fields.String(required=True)
    original_name = fields.String(required=True)
    change_note = fields.String(required=True, allow_none=True)


class PendingChangeSchema(Schema):
    class Meta:
        description = (
            "Of a pending request of kind `change` or `sperrfrist`: what its approval sets on "
            "the released record (its draft), which until then the record and the public keep "
            "as approved; null for a request to release and once decided."
        )

    fields_ = fields.Dict(
        data_key="fields",
        attribute="fields",
        required=True,
        metadata={"description": "The public fields and their new values."},
    )
    content = fields.Nested(
        PendingContentSchema,
        required=True,
        allow_none=True,
        metadata={"description": "The new content, or null if the content stays."},
    )


class ReleaseRequestSummarySchema(Schema):
    class Meta:
        description = "A pending release request; `GET /api/release-requests/{id}` has all of it."

    id = fields.String(required=True, metadata={"format": "uuid"})
    record_id = fields.String(metadata={"format": "uuid"})
    kind = fields.String(required=True, validate=validate.OneOf(list(RequestKind)))
    state = fields.String(required=True, validate=validate.OneOf([RequestState.PENDING]))
    sperrfrist = CalendarDate(required=True, allow_none=True)
    pending = fields.Nested(PendingChangeSchema, allow_none=True)


class WithReleaseRequestSchema(Schema):
    """What a record answer of an owner, editor or administrator adds (setting on)."""

    release_request = fields.Nested(
        ReleaseRequestSummarySchema,
        allow_none=True,
        metadata={
            "description": "With RELEASE_APPROVAL=on only: the record's pending release "
            "request, or null. A read shows the record as its editors asked for it while one "
            "waits: a waiting change's public fields, and `freigabe` true while a release "
            "waits; a write answers the record as stored (a released record's change waits in "
            "`pending`)."
        },
    )


class WithReleaseRequestsSchema(Schema):
    """What a create answer adds (setting on)."""

    release_requests = fields.List(
        fields.Nested(ReleaseRequestSummarySchema),
        metadata={
            "description": "With RELEASE_APPROVAL=on only: the release request opened for each "
            "record that asked for freigabe true (stored unreleased until approved)."
        },
    )
