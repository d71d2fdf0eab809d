"""What the owner's cover answers look like (`GET`/`PUT /api/files/{id}/cover`)."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from app.models import CoverOrigin

ORIGINS = [CoverOrigin.CONTENT, CoverOrigin.OWNER]


class CoverStateSchema(Schema):
    class Meta:
        description = "One picture of the record: derived from its bytes, or its owner's."

    origin = fields.String(required=True, validate=validate.OneOf(ORIGINS))
    sha256 = fields.String(
        required=True, metadata={"description": "SHA-256 of the bytes it pictures."}
    )
    state = fields.String(
        required=True,
        validate=validate.OneOf(["made", "waiting", "failed"]),
        metadata={"description": "Made, waiting to be made (after the commit), or failed."},
    )
    current = fields.Boolean(
        required=True,
        metadata={"description": "Of the current bytes (false: of a change waiting)."},
    )
    width = fields.Integer(allow_none=True, metadata={"description": "Proportions drawn."})
    height = fields.Integer(allow_none=True)
    error = fields.String(allow_none=True, metadata={"description": "Why it failed."})


class CoversSchema(Schema):
    class Meta:
        description = (
            "A record's pictures. The public gets the one `shown` at "
            "/records/{id}/cover/{200|1200}.{webp|jpg} while it may download the content."
        )

    shown = fields.String(
        required=True,
        allow_none=True,
        validate=validate.OneOf(ORIGINS),
        metadata={"description": "Which one the record shows (the owner's wins), null: none yet."},
    )
    covers = fields.List(fields.Nested(CoverStateSchema), required=True)
