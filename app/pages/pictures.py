"""A record's cover pictures for everyone who may download its content: the public at
`/records/{id}/cover/{200|1200}.{webp|jpg}`, and a share link's holder at
`/s/<secret>/files/{id}/cover/...` (app/covers decides which picture and when)."""

from __future__ import annotations

import uuid

from flask import Response, request

from app.covers.responses import picture_response
from app.http import PUBLIC_CACHE
from app.links.holder import HOLDER_HEADERS, PAGE_PREFIX, failures_limited, open_link
from app.pages import tombstones
from app.pages.blueprint import bp


@bp.get("/records/<uuid:record_id>/cover/<int:width>.<ext>")
@tombstones.answered
def cover(record_id: uuid.UUID, width: int, ext: str) -> Response:
    """404 while the record is unreleased or under embargo (never 403), 410 with the
    tombstone once a record with a DOI left public view."""
    return picture_response(request, None, record_id, width, ext, PUBLIC_CACHE)


@bp.get(f"{PAGE_PREFIX}<secret>/files/<uuid:record_id>/cover/<int:width>.<ext>")
@failures_limited
def shared_cover(secret: str, record_id: uuid.UUID, width: int, ext: str) -> Response:
    """Where the link's holder may download the record."""
    holder = open_link(secret).holder
    return picture_response(request, holder, record_id, width, ext, HOLDER_HEADERS["Cache-Control"])
