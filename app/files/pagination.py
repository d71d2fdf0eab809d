"""List answers: Laravel's length-aware paginator envelope (which existing clients parse), or a
keyset (cursor) envelope for deep paging, chosen by the `cursor` query parameter."""

from __future__ import annotations

import math
from typing import Any

from flask import current_app, request

from app.files.listing import KeysetPage, Listing, Page, keyset_page, paginate
from app.http import external_url
from app.schemas.cursor import encode_cursor
from app.schemas.fast_dump import FastDump


def url_with(name: str, value: str) -> str:
    """This list's URL with one parameter set and the other parameters kept."""
    args = [(k, v) for k, v in request.args.items(multi=True) if k not in ("page", "cursor")]
    args.append((name, value))
    return external_url(request.script_root + request.path, args)


def list_response(listing: Listing, params: dict[str, Any], rows: FastDump) -> dict[str, Any]:
    per_page = current_app.config["PAGE_SIZE"]
    if "cursor" in params:
        return cursor_envelope(keyset_page(listing, params["cursor"], per_page), rows)
    return page_envelope(paginate(listing, params["page"], per_page), rows)


def cursor_envelope(result: KeysetPage, rows: FastDump) -> dict[str, Any]:
    next_cursor = encode_cursor(result.next_position) if result.next_position else None
    return {
        "data": rows.dump(result.items, many=True),
        "path": external_url(request.script_root + request.path),
        "per_page": result.per_page,
        "next_cursor": next_cursor,
        "next_page_url": url_with("cursor", next_cursor) if next_cursor else None,
    }


def page_envelope(result: Page, rows: FastDump) -> dict[str, Any]:
    last_page = max(1, math.ceil(result.total / result.per_page))
    first_index = (result.page - 1) * result.per_page + 1
    has_items = bool(result.items)
    return {
        "data": rows.dump(result.items, many=True),
        "current_page": result.page,
        "per_page": result.per_page,
        "total": result.total,
        "last_page": last_page,
        "from": first_index if has_items else None,
        "to": first_index + len(result.items) - 1 if has_items else None,
        "first_page_url": url_with("page", "1"),
        "last_page_url": url_with("page", str(last_page)),
        "next_page_url": (
            url_with("page", str(result.page + 1)) if result.page < last_page else None
        ),
        "prev_page_url": url_with("page", str(result.page - 1)) if result.page > 1 else None,
        "path": external_url(request.script_root + request.path),
        # Where keyset pagination continues after this page (null when nothing follows).
        "next_cursor": encode_cursor(result.next_position) if result.next_position else None,
    }
