"""The list envelope of Laravel's length-aware paginator, which existing clients parse."""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import urlencode

from flask import request
from marshmallow import Schema

from app.files.services import Page


def _page_url(page: int) -> str:
    args = [(k, v) for k, v in request.args.items(multi=True) if k != "page"]
    args.append(("page", str(page)))
    return f"{request.base_url}?{urlencode(args)}"


def paginated_response(result: Page, schema: Schema) -> dict[str, Any]:
    last_page = max(1, math.ceil(result.total / result.per_page))
    first_index = (result.page - 1) * result.per_page + 1
    has_items = bool(result.items)
    return {
        "data": schema.dump(result.items, many=True),
        "current_page": result.page,
        "per_page": result.per_page,
        "total": result.total,
        "last_page": last_page,
        "from": first_index if has_items else None,
        "to": first_index + len(result.items) - 1 if has_items else None,
        "first_page_url": _page_url(1),
        "last_page_url": _page_url(last_page),
        "next_page_url": _page_url(result.page + 1) if result.page < last_page else None,
        "prev_page_url": _page_url(result.page - 1) if result.page > 1 else None,
        "path": request.base_url,
    }
