"""What the audit endpoints take and answer, for validation and for the OpenAPI document."""

from __future__ import annotations

from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, pre_load

from app.schemas.field_types import PlainString, Since


class SeqCursor(fields.Field):
    """Where the next page starts: empty for the first page, else a `next_cursor`."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int | None:
        if value == "":
            return None
        if (
            not isinstance(value, str)
            or not value.isascii()
            or not value.isdigit()
            or len(value) > 18
        ):
            raise ValidationError("The cursor field must be a cursor from a previous page.")
        return int(value)


class AuditQuerySchema(Schema):
    class Meta:
        unknown = EXCLUDE

    cursor = SeqCursor(metadata={"description": "Empty for the first page, then `next_cursor`."})
    record_id = fields.UUID(metadata={"description": "Entries of this record (also deleted)."})
    actor = PlainString(metadata={"description": "The actor's email, or `cli:<command>`."})
    action = PlainString(metadata={"description": "e.g. `file.update`, `token.revoke`."})
    since = Since(metadata={"description": "Entries at or after this instant."})
    until = Since(metadata={"description": "Entries before this instant."})

    @pre_load
    def drop_empty(self, data: Any, **kwargs: Any) -> dict[str, Any]:
        return {key: value for key, value in data.items() if value != "" or key == "cursor"}


#: An audit entry's fields, the one table of them: the keys the API and the export show, in
#: this order, as the API describes them. The entry's hash covers all but `seq` (the number
#: across chains the database gives) and `hash` (app/audit/trail.py, `HASHED`); the table's
#: columns (app/models.py) are these, which tests/audit checks.
ENTRY_FIELDS: dict[str, fields.Field] = {
    "seq": fields.Integer(required=True, metadata={"description": "Number across all entries."}),
    "chain": fields.Integer(required=True, metadata={"description": "The hash chain it is in."}),
    "chain_seq": fields.Integer(required=True, metadata={"description": "Its place in the chain."}),
    "at": fields.String(required=True, metadata={"description": "UTC, microseconds."}),
    "actor_id": fields.Integer(required=True, allow_none=True),
    "actor": fields.String(required=True),
    "action": fields.String(required=True),
    "record_id": fields.UUID(required=True, allow_none=True),
    "account_id": fields.Integer(required=True, allow_none=True),
    "changes": fields.Dict(required=True),
    "request_id": fields.String(required=True, allow_none=True),
    "prev_hash": fields.String(required=True),
    "hash": fields.String(required=True),
}

AuditEntrySchema = Schema.from_dict(ENTRY_FIELDS, name="AuditEntrySchema")


class AuditPageSchema(Schema):
    data = fields.List(fields.Nested(AuditEntrySchema), required=True)
    path = fields.String(required=True)
    per_page = fields.Integer(required=True)
    next_cursor = fields.String(required=True, allow_none=True)
    next_page_url = fields.String(required=True, allow_none=True)


class HistoryQuerySchema(Schema):
    class Meta:
        unknown = EXCLUDE

    cursor = SeqCursor(metadata={"description": "Empty for the first page, then `next_cursor`."})


class HistorySchema(AuditPageSchema):
    """A page of a record's entries, oldest first, as the trail's pages (`next_cursor`)."""
