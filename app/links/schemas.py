"""What a share link looks like over the API, in and out."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from marshmallow import EXCLUDE, RAISE, Schema, ValidationError, fields, post_load, pre_load

from app.schemas.field_types import PageNumber, Text, Timestamp, VirtualPath, parse_since
from app.schemas.pages import page_envelope
from app.schemas.records import FileRecordSchema

EXPIRY = (
    "When the link stops working: an ISO 8601 instant (no offset means UTC), in the future and "
    "at most `SHARE_LINK_MAX_DAYS` (default 90) days ahead."
)


class Instant(fields.Field):
    """An ISO 8601 date or timestamp, as the list filter `since` reads one."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> datetime:
        if not isinstance(value, str):
            raise ValidationError(f"The {self.name} field must be an ISO 8601 timestamp.")
        try:
            return parse_since(value)
        except ValueError:
            raise ValidationError(
                f"The {self.name} field must be an ISO 8601 timestamp, e.g. 2026-12-01T10:00:00Z."
            ) from None


class RecordLinkInputSchema(Schema):
    class Meta:
        unknown = RAISE

    expires_at = Instant(
        required=True,
        error_messages={"required": "The expires_at field is required."},
        metadata={"description": EXPIRY, "type": "string", "examples": ["2026-12-01T10:00:00Z"]},
    )
    description = Text(
        metadata={"description": "Who the link is for, e.g. `Redaktion Wirtschaft`."}
    )


class KitInputSchema(RecordLinkInputSchema):
    path = VirtualPath(
        required=True,
        allow_none=False,
        error_messages={"required": "The path field is required."},
        metadata={
            "description": "The folder: its records and those of its subfolders (`a/b` holds "
            "`a/b` and `a/b/c`, not `a/bc`). A trailing slash is ignored."
        },
    )

    @pre_load
    def without_trailing_slash(self, data: Any, **kwargs: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("path"), str):
            data = {**data, "path": data["path"].strip().rstrip("/")}
        return data

    @post_load
    def a_folder(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """An empty path would name every folder: a kit names one."""
        if data.get("path") is None:
            raise ValidationError({"path": ["The path field must name a folder."]})
        return data


class LinkSchema(Schema):
    """A link as its creator, the record's owner and administrators see it: never its secret."""

    id = fields.String(metadata={"format": "uuid"})
    record_id = fields.String(
        allow_none=True, metadata={"format": "uuid", "description": "A record link's record."}
    )
    path = fields.String(allow_none=True, metadata={"description": "A press kit's folder."})
    description = fields.String(allow_none=True)
    expires_at = Timestamp()
    created_at = Timestamp()
    created_by = fields.String(metadata={"description": "The creator's email."})
    downloads = fields.Integer(
        metadata={"description": "Downloads through the link (a range from byte 0 counts)."}
    )
    first_used_at = Timestamp(allow_none=True)
    last_used_at = Timestamp(allow_none=True)
    state = fields.String(metadata={"enum": ["active", "expired", "revoked"]})


class CreatedLinkSchema(LinkSchema):
    url = fields.String(
        metadata={
            "description": "The holder's page, `/s/<secret>` (HTML; its downloads and the "
            "JSON are under `/api/shared/<secret>`), with the secret; shown in this answer only."
        }
    )


_NumberedLinks, _ = page_envelope(LinkSchema())


class LinkPageSchema(_NumberedLinks):  # type: ignore[valid-type,misc]
    """One page of links, newest first, in the file list's envelope (Laravel's length-aware
    paginator); `next_cursor` is always null: links are paged by number only."""


class LinkQuerySchema(Schema):
    class Meta:
        unknown = EXCLUDE

    page = PageNumber(load_default=1, metadata={"description": "Page number, from 1."})

    record_id = fields.UUID(metadata={"description": "Only links to this record."})
    path = fields.String(metadata={"description": "Only press kits of this folder."})


class SharedPageQuerySchema(Schema):
    class Meta:
        unknown = EXCLUDE

    page = PageNumber(load_default=1, metadata={"description": "Page number, from 1."})


class SharedRecordSchema(FileRecordSchema):
    """A record as the public sees it, with when the link ends."""

    class Meta:
        exclude = ("erstellt_von", "freigegeben_von")

    link_expires_at = Timestamp(metadata={"description": "When the link stops working."})
