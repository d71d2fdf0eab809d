"""The list envelope (Laravel's length-aware paginator, or a keyset page with `?cursor=`), as
the OpenAPI document shows it; app/files/pagination.py writes it."""

from __future__ import annotations

from marshmallow import Schema, fields


def _position(description: str) -> fields.Integer:
    return fields.Integer(
        required=True, allow_none=True, metadata={"minimum": 1, "description": description}
    )


def _url(description: str | None = None, *, allow_none: bool = False) -> fields.String:
    about = {"description": description} if description else {}
    return fields.String(required=True, allow_none=allow_none, metadata={"format": "uri", **about})


def _count(minimum: int) -> fields.Integer:
    return fields.Integer(required=True, metadata={"minimum": minimum})


def page_envelope(record: Schema) -> tuple[type[Schema], type[Schema]]:
    """The numbered page and the keyset page of `record`s."""
    data = fields.List(fields.Nested(record), required=True)
    path = _url("The list URL without query.")
    next_cursor = fields.String(
        required=True,
        allow_none=True,
        metadata={
            "description": "Continue with ?cursor=<this> (keyset pagination); null at the end."
        },
    )
    numbered = Schema.from_dict(
        {
            "data": data,
            "current_page": _count(1),
            "per_page": _count(1),
            "total": _count(0),
            "last_page": _count(1),
            "from": _position("Position of the first record; null when empty."),
            "to": _position("Position of the last record; null when empty."),
            "first_page_url": _url(),
            "last_page_url": _url(),
            "next_page_url": _url("null on the last page.", allow_none=True),
            "prev_page_url": _url("null on the first page.", allow_none=True),
            "path": path,
            "next_cursor": next_cursor,
        },
        name="NumberedPage",
    )
    keyset = Schema.from_dict(
        {
            "data": data,
            "path": path,
            "per_page": _count(1),
            "next_cursor": next_cursor,
            "next_page_url": _url("null after the last record.", allow_none=True),
        },
        name="KeysetPage",
    )
    return numbered, keyset
