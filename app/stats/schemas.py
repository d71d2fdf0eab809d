"""What the statistics endpoints take and answer, for validation and the OpenAPI document."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, post_load, pre_load, validate

from app.schemas.field_types import PlainString
from app.stats.queries import SORTS, today

#: The longest period one answer covers, so an answer stays small (day rows: ten years).
MAX_DAYS = 3660


class _PeriodQuery(Schema):
    class Meta:
        unknown = EXCLUDE

    from_ = fields.Date(
        data_key="from", metadata={"description": "First UTC day (default: see `until`)."}
    )
    until = fields.Date(metadata={"description": "Last UTC day, included (default: today)."})

    @pre_load
    def drop_empty(self, data: Any, **kwargs: Any) -> dict[str, Any]:
        return {key: value for key, value in data.items() if value != ""}

    def default_start(self, end: date, granularity: str) -> date:
        if granularity == "month":
            month = end.year * 12 + end.month - 1 - 11
            return date(month // 12, month % 12 + 1, 1)
        return end - timedelta(days=29)

    @post_load
    def period(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        granularity = data.get("granularity", "day")
        end = data.get("until") or today()
        start = data.pop("from_", None)
        if start is None:
            try:
                start = self.default_start(end, granularity)
            except (OverflowError, ValueError):  # before the year 1
                start = date.min
        if start > end:
            raise ValidationError("from must not be after until.", "from")
        if (end - start).days >= MAX_DAYS:
            raise ValidationError(f"At most {MAX_DAYS} days at once.", "from")
        return {**data, "from": start, "until": end, "granularity": granularity}


class RecordStatsQuery(_PeriodQuery):
    granularity = fields.String(
        validate=validate.OneOf(["day", "month"]),
        metadata={
            "description": "`day` (default: the last 30 days) or `month` (default: the last "
            "12 months)."
        },
    )


class RankedStatsQuery(_PeriodQuery):
    path = PlainString(metadata={"description": "Records whose path starts with this."})
    sort = fields.String(
        validate=validate.OneOf(list(SORTS)),
        load_default="-total",
        metadata={"description": "`-total` (default), `total`, `-unique` or `unique`."},
    )
    page = fields.Integer(validate=validate.Range(min=1), load_default=1)


class DoorsSchema(Schema):
    public = fields.Integer(required=True, metadata={"description": "Without a token."})
    account = fields.Integer(required=True, metadata={"description": "With a token."})
    link = fields.Integer(required=True, metadata={"description": "Through a share link."})


class CountsSchema(Schema):
    total = fields.Integer(
        required=True, metadata={"description": "Requests by people (COUNTER Total_Item_Requests)."}
    )
    unique = fields.Integer(
        required=True,
        metadata={"description": "Visitors per day, summed (COUNTER Unique_Item_Requests)."},
    )
    machine = fields.Integer(
        required=True, metadata={"description": "Requests by scripts and tools, apart."}
    )
    views = fields.Integer(
        required=True,
        metadata={"description": "Views of the record's landing page by people (same rules)."},
    )
    unique_views = fields.Integer(
        required=True, metadata={"description": "Visitors who viewed the landing page, per day."}
    )
    doors = fields.Nested(DoorsSchema, required=True, metadata={"description": "`total` by door."})


class PeriodSchema(CountsSchema):
    period = fields.String(required=True, metadata={"description": "`2026-11-26` or `2026-11`."})


class RecordStatsSchema(CountsSchema):
    id = fields.UUID(required=True)
    from_ = fields.Date(data_key="from", attribute="from", required=True)
    until = fields.Date(required=True)
    granularity = fields.String(required=True)
    periods = fields.List(fields.Nested(PeriodSchema), required=True)


class PublicDoorsSchema(Schema):
    public = fields.Integer(required=True, metadata={"description": "Without a token."})


class RecordTotalsSchema(CountsSchema):
    """The public figures: downloads without a token and page views, the counts that happen
    while the public may have the record (share-link and account downloads, which may come
    before the release, are the owner's to see)."""

    id = fields.UUID(required=True)
    doors = fields.Nested(
        PublicDoorsSchema, required=True, metadata={"description": "`total` by door."}
    )


class RankedRecordSchema(Schema):
    id = fields.UUID(required=True)
    titel = fields.String(required=True, allow_none=True)
    path = fields.String(required=True, allow_none=True)
    total = fields.Integer(required=True)
    unique = fields.Integer(required=True)
    machine = fields.Integer(required=True)
    views = fields.Integer(required=True)


class RankedPageSchema(Schema):
    data = fields.List(fields.Nested(RankedRecordSchema), required=True)
    current_page = fields.Integer(required=True)
    per_page = fields.Integer(required=True)
    total = fields.Integer(required=True, metadata={"description": "Records in the answer."})
    last_page = fields.Integer(required=True)
