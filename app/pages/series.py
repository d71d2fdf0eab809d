"""A series' page (`/series/<slug>`, issue 49): its title and description, and its records
the public may see, newest first, a page at a time (the cursor of the folder pages), with
each record's number in the series; the head names its Atom feed. Which records show is
`access.visible(None)`'s to say, as on every page."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flask import Response, request
from flask_babel import gettext as _
from sqlalchemy import select

from app.exceptions import RecordNotFound
from app.extensions import db
from app.files import access
from app.files.listing import NEWEST_FIRST, Position, before, position_of
from app.http import external_url
from app.models import FileRecord, Series
from app.pages.blueprint import bp
from app.pages.browse import PAGE_SIZE, RecordItem, record_item
from app.pages.i18n import render_page
from app.pages.paging import cursor_arg, page_url
from app.pages.records import clean_text
from app.schemas.attribution import SLUG_FORM
from app.schemas.cursor import encode_cursor


@dataclass(slots=True)
class SeriesPage:
    title: str
    description: str
    url: str
    records: list[tuple[RecordItem, str]]
    older: str | None
    feeds: list[tuple[str, str, str]] = field(default_factory=list)


def series_records(slug: str, after: Position | None, size: int) -> tuple[list[Any], bool]:
    """The newest `size` records of the series the public may see, after `after`; and
    whether more follow (an index range read of ix_file_records_series)."""
    query = select(*FileRecord.__table__.columns).where(
        FileRecord.series_slug == slug, access.visible(None)
    )
    if after is not None:
        query = query.where(before(after))
    rows = list(db.session.execute(query.order_by(*NEWEST_FIRST).limit(size + 1)))
    return rows[:size], len(rows) > size


def series_url(slug: str) -> str:
    return external_url(f"{request.script_root}/series/{slug}")


def feed_url(slug: str) -> str:
    return external_url(f"{request.script_root}/api/public/feed.atom", [("series", slug)])


@bp.get("/series/<slug>")
def series(slug: str) -> Response:
    found = db.session.get(Series, slug) if SLUG_FORM.fullmatch(slug) else None
    if found is None:
        raise RecordNotFound()
    today = access.today()
    rows, more = series_records(slug, cursor_arg("cursor"), PAGE_SIZE)
    page = SeriesPage(
        title=clean_text(found.title),
        description=clean_text(found.description),
        url=series_url(slug),
        records=[(record_item(row, today), clean_text(row.series_number)) for row in rows],
        older=page_url(request.path, cursor=encode_cursor(position_of(rows[-1]))) if more else None,
    )
    page.feeds.append((feed_url(slug), "application/atom+xml", _("Neu in dieser Reihe")))
    return Response(render_page("pages/series.html", page=page))
