"""The list query with search: `q` and `sort` on top of the list filters."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, post_load, validate

from app.schemas.field_types import PlainString
from app.schemas.records import ListQuerySchema
from app.search.query import QuerySyntaxError, parse_query

RELEVANCE = "relevance"
NEWEST_FIRST = "-created_at"

Q_ABOUT = (
    "Full-text search in titel, beschreibung, autoren, sachschlagwoerter, org_themen, aktiv_id, "
    'reprotyp and original_name, written as in a web search: words (all must match), "a '
    'phrase", OR between two terms, -word to exclude one. Case and accents do not matter; '
    "German word forms match (Berichte finds Bericht). Combines with every other filter."
)
SORT_ABOUT = (
    "Order of the results: `relevance` (best matches first, then newest first; the default "
    "with q) or `-created_at` (newest first; the default without q, and the only order of "
    "cursor pagination). Page answers in relevance order carry no next_cursor; a cursor "
    "always continues in newest-first order, so with q and cursor the results come newest "
    "first, and sort=relevance together with cursor is refused."
)


class SearchText(PlainString):
    """A query as typed; it is loaded as a parsed `SearchQuery`."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        text = super()._deserialize(value, attr, data, **kwargs)
        try:
            return parse_query(text)
        except QuerySyntaxError as exc:
            raise ValidationError(str(exc)) from None


class SearchListQuerySchema(ListQuerySchema):
    q = SearchText(metadata={"description": Q_ABOUT})
    sort = fields.String(
        validate=validate.OneOf(
            [RELEVANCE, NEWEST_FIRST],
            error=f"The sort field must be {RELEVANCE} or {NEWEST_FIRST}.",
        ),
        metadata={"description": SORT_ABOUT},
    )

    @post_load
    def resolve_order(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        sort = data.get("sort")
        if sort == RELEVANCE and "cursor" in data:
            raise ValidationError(
                "The sort field cannot be relevance with cursor pagination (newest first).",
                "sort",
            )
        default = RELEVANCE if "q" in data and "cursor" not in data else NEWEST_FIRST
        data["sort"] = sort or default
        return data


# The release filter is not offered publicly (the public API, the pages' search): a `freigabe`
# parameter is ignored, never checked.
public_list_query_schema = SearchListQuerySchema(exclude=("freigabe",))
