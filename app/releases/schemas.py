"""What the release requests endpoints take and answer."""

from __future__ import annotations

from typing import Any

from marshmallow import EXCLUDE, RAISE, Schema, ValidationError, fields, pre_load

from app.files.schemas import PendingChangeSchema
from app.models import RequestKind, RequestState
from app.schemas.field_types import BESCHREIBUNG_MAX, CalendarDate, Cursor, Text, Timestamp
from app.schemas.records import FileRecordSchema

STATES = tuple(RequestState)


class _Body(Schema):
    """A move's JSON body: an object (or none), of the fields named and no others."""

    class Meta:
        unknown = RAISE

    @pre_load
    def an_object(self, data: Any, **kwargs: Any) -> Any:
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise ValidationError(["The request body must be a JSON object."], "body")
        return data


class SubmitSchema(_Body):
    note = Text(
        max_length=BESCHREIBUNG_MAX,
        metadata={"description": "What the approvers should know (at most 5000 characters)."},
    )


class ApproveSchema(_Body):
    override_reason = Text(
        max_length=BESCHREIBUNG_MAX,
        metadata={
            "description": "Administrators only: approve although the four-eyes rule refuses "
            "it (you own, submitted or edited the record), for this reason, which the audit "
            "trail and `flask releases report` keep."
        },
    )


class DeclineSchema(_Body):
    reason = Text(
        required=True,
        allow_none=False,
        max_length=BESCHREIBUNG_MAX,
        error_messages={"required": "The reason field is required."},
        metadata={"description": "Why: the submitter reads it."},
    )

    @pre_load
    def the_reason(self, data: Any, **kwargs: Any) -> Any:
        if (
            isinstance(data, dict)
            and isinstance(data.get("reason"), str)
            and not data["reason"].strip()
        ):
            raise ValidationError(["The reason field is required."], "reason")
        return data


class CancelSchema(_Body):
    reason = Text(max_length=BESCHREIBUNG_MAX, metadata={"description": "Why, if you like."})


class RequestQuerySchema(Schema):
    class Meta:
        unknown = EXCLUDE

    state = fields.String(
        validate=lambda value: value in STATES or _bad_state(),
        metadata={"description": "Only requests in this state.", "enum": list(STATES)},
    )
    record_id = fields.UUID(metadata={"description": "Only requests of this record."})
    cursor = Cursor(
        metadata={
            "description": "The next page: a `next_cursor` of the previous one (empty or "
            "absent: the first page)."
        }
    )

    @pre_load
    def drop_empty(self, data: Any, **kwargs: Any) -> dict[str, Any]:
        return {key: value for key, value in data.items() if value != ""}


def _bad_state() -> bool:
    raise ValidationError(f"The state field must be one of: {', '.join(STATES)}.")


class ReleaseRequestSchema(Schema):
    """A release request: what was submitted, bound to which content, and how it ended."""

    id = fields.String(required=True, metadata={"format": "uuid"})
    record_id = fields.String(required=True, metadata={"format": "uuid"})
    kind = fields.String(
        required=True,
        metadata={
            "enum": list(RequestKind),
            "description": "`release`: make the record public (freigabe true); `sperrfrist`: "
            "move a released record's embargo earlier, to `sperrfrist`; `change`: a new "
            "content or new public fields of a released record (`pending`).",
        },
    )
    sperrfrist = CalendarDate(
        required=True,
        allow_none=True,
        metadata={"description": "Of a `sperrfrist` request: the embargo asked for (null: none)."},
    )
    state = fields.String(required=True, metadata={"enum": list(STATES)})
    note = fields.String(required=True, allow_none=True)
    content_sha256 = fields.String(
        required=True, metadata={"description": "SHA-256 of the content submitted."}
    )
    public_hash = fields.String(
        required=True,
        metadata={
            "description": "SHA-256 of the public fields' values when submitted, for an "
            "approver's tool to check against `record`: the lowercase hex SHA-256 of the UTF-8 "
            "bytes of the JSON object of `original_name`, `mime_type`, `aktiv_id`, `path`, "
            "`reprotyp`, `titel`, `beschreibung`, `autoren`, `sachschlagwoerter`, "
            "`org_themen`, `sperrfrist` and `reihenfolge`, and of `creators`, "
            "`related_identifiers` and `series` (as the record answer shows them) only those "
            "that hold a value (not null, not empty), with its keys sorted (nested ones too), "
            "the "
            'separators "," and ":" (no spaces), non-ASCII characters as they are (not '
            "escaped), dates as YYYY-MM-DD and null for a missing value (what Python's "
            "`json.dumps(values, sort_keys=True, separators=(',', ':'), ensure_ascii=False)` "
            "writes). Of a `change` or `sperrfrist` request, the values as they will be after "
            "the approval: `record`'s, with `pending.fields`, and `pending.content`'s "
            "`original_name` and `mime_type` if it has new content."
        },
    )
    submitted_by = fields.String(
        required=True, allow_none=True, metadata={"description": "The submitter's email."}
    )
    submitted_at = Timestamp(required=True)
    decided_by = fields.String(
        required=True,
        allow_none=True,
        metadata={"description": "Who approved, declined or cancelled it (email)."},
    )
    decided_at = Timestamp(required=True, allow_none=True)
    reason = fields.String(
        required=True,
        allow_none=True,
        metadata={"description": "Why it was declined, cancelled, or approved by override."},
    )
    override = fields.Boolean(
        required=True,
        metadata={"description": "Approved by an administrator over the four-eyes rule."},
    )
    changes = fields.Dict(
        required=True,
        allow_none=True,
        metadata={
            "description": "Of a request cancelled by a change: what changed, "
            "`{field: [old, new]}` (`checksum_sha256` for the content)."
        },
    )
    pending = fields.Nested(PendingChangeSchema, required=True, allow_none=True)
    change_notes = fields.List(
        fields.Dict(),
        required=True,
        allow_none=True,
        metadata={
            "description": "Of a pending `release`: the change notes of the record's kept "
            "versions, `[{version, change_note}]`, which its page shows once it is public; "
            "null otherwise. A note written after submission came with new content, which "
            "cancelled the request."
        },
    )
    record = fields.Nested(
        FileRecordSchema,
        required=True,
        allow_none=True,
        metadata={"description": "The record as it is now; null once deleted."},
    )


class ReleaseRequestListSchema(Schema):
    data = fields.List(fields.Nested(ReleaseRequestSchema), required=True)
    next_cursor = fields.String(
        required=True,
        allow_none=True,
        metadata={"description": "Send it back as `cursor` for the next page; null: the last."},
    )
    next_page_url = fields.String(
        required=True,
        allow_none=True,
        metadata={"description": "The next page's address (this one's with `cursor`)."},
    )
