"""What the series endpoints take and answer."""

from __future__ import annotations

from typing import Any

from marshmallow import RAISE, Schema, ValidationError, fields, pre_load

from app.schemas.attribution import SLUG_FORM, SLUG_MAX, required
from app.schemas.field_types import BESCHREIBUNG_MAX, Text, Timestamp


class NewSeriesSchema(Schema):
    """A new series: its slug (its address, never changed), title and description."""

    class Meta:
        unknown = RAISE

    slug = fields.String(
        required=True,
        error_messages=required("slug"),
        metadata={
            "description": "Its address, `/series/{slug}`: lowercase letters and digits in "
            "words joined by single hyphens.",
            "pattern": SLUG_FORM.pattern,
            "maxLength": SLUG_MAX,
        },
    )
    title = Text(
        required=True,
        allow_none=False,
        error_messages=required("title"),
        metadata={"description": "Its name, as citations print it (`IAB-Forschungsbericht`)."},
    )
    description = Text(max_length=BESCHREIBUNG_MAX, metadata={"description": "What it holds."})

    @pre_load
    def an_object(self, data: Any, **kwargs: Any) -> Any:
        if not isinstance(data, dict):
            raise ValidationError(["The request body must be a JSON object."], "body")
        slug = data.get("slug")
        if isinstance(slug, str) and not (SLUG_FORM.fullmatch(slug) and len(slug) <= SLUG_MAX):
            raise ValidationError(
                f"The slug field must be lowercase letters and digits in words joined by single "
                f"hyphens, at most {SLUG_MAX} characters.",
                "slug",
            )
        if (
            data.get("title") is not None
            and isinstance(data["title"], str)
            and not data["title"].strip()
        ):
            raise ValidationError("The title field is required.", "title")
        return data


class SeriesSchema(Schema):
    """A series, with the addresses where readers and machines find its records."""

    slug = fields.String(required=True)
    title = fields.String(required=True)
    description = fields.String(required=True, allow_none=True)
    created_at = Timestamp(required=True)
    page = fields.String(required=True, metadata={"description": "Its page, newest first."})
    feed = fields.String(required=True, metadata={"description": "Its Atom feed."})
    oai_set = fields.String(required=True, metadata={"description": "Its OAI-PMH setSpec."})


class SeriesListSchema(Schema):
    data = fields.List(fields.Nested(SeriesSchema), required=True)
