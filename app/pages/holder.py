"""The holder's page of a share link (`/s/<secret>`): what the link opens, with its downloads.

The link is resolved as `/api/shared/<secret>` resolves it (app/links), on every request; what
it reaches is decided by app/files/access.py for its `LinkHolder`. Downloads go through the
`/api/shared/<secret>/...` routes, which count them. The secret is in the address, so the page
is never cached, indexed or named in a Referer (app/pages/routes.py sets the headers of
app/links/holder.py), and the access log shows the link's id instead (app/access_log.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

from flask import Response, request
from flask_babel import format_datetime
from sqlalchemy import select

from app.covers import services as covers
from app.covers.services import Shown
from app.extensions import db
from app.files import access
from app.files.listing import Listing, keyset_page
from app.http import external_url
from app.links import services
from app.links.holder import PAGE_PREFIX, SHARED_PREFIX, failures_limited, open_link
from app.models import FileRecord
from app.pages.blueprint import bp
from app.pages.i18n import render_page
from app.pages.paging import cursor_arg, page_url
from app.pages.records import clean_text, size_text, title_of
from app.schemas.cursor import encode_cursor

#: Records of a press kit shown at a time.
KIT_PAGE_SIZE = 50


@dataclass(slots=True)
class SharedRecord:
    title: str
    authors: str
    description: str
    file_name: str
    mime_type: str
    size_text: str
    download: str
    page: str | None
    embargo_until: date | None
    #: Its cover, at the holder's address (app/pages/pictures.py): a holder may see it.
    cover: Shown | None = None


@dataclass(slots=True)
class HolderPage:
    expires_at: Any
    folder: str | None
    zip_url: str
    records: list[SharedRecord] = field(default_factory=list)
    more: str | None = None
    #: The embargo dates still running of everything the link opens (not only this page's).
    embargoes: list[date] = field(default_factory=list)


#: The most embargo dates a kit's page states at its top.
MAX_EMBARGO_DATES = 10


def running_embargoes(holder: access.LinkHolder, today: date) -> list[date]:
    """The distinct embargo dates after `today` of the records `holder` may see, latest first."""
    query = (
        select(FileRecord.sperrfrist)
        .where(access.visible(holder), FileRecord.sperrfrist > today)
        .distinct()
        .order_by(FileRecord.sperrfrist.desc())
        .limit(MAX_EMBARGO_DATES)
    )
    return list(db.session.scalars(query))


def shared_records(rows: list[Any], base: str, secret: str, today: date) -> list[SharedRecord]:
    """The records a link opens, each with its cover (one query for all)."""
    found = covers.shown_for(rows)
    shared = [shared_record(row, base, today) for row in rows]
    for item, row in zip(shared, rows, strict=True):
        holder = external_url(f"{request.script_root}{PAGE_PREFIX}{secret}/files/{row.id}")
        item.cover = covers.shown_at(found.get(row.id), holder)
    return shared


def shared_record(row: Any, base: str, today: date) -> SharedRecord:
    return SharedRecord(
        title=title_of(row),
        authors=clean_text(row.autoren),
        description=clean_text(row.beschreibung),
        file_name=clean_text(row.original_name),
        mime_type=row.mime_type,
        size_text=size_text(row.size),
        download=f"{base}/files/{row.id}/download",
        # The public page exists only for a released record.
        page=external_url(f"{request.script_root}/records/{row.id}") if row.freigabe else None,
        embargo_until=row.sperrfrist if access.embargo_active(row, today) else None,
    )


@bp.get(f"{PAGE_PREFIX}<secret>")
@failures_limited
def holder(secret: str) -> Response:
    try:
        link = open_link(secret)
    except services.LinkExpired as expired:
        return _expired(expired)
    holder = link.holder
    base = external_url(f"{request.script_root}{SHARED_PREFIX}{secret}")
    page = HolderPage(expires_at=link.expires_at, folder=holder.path, zip_url=f"{base}/files.zip")
    today = access.today()
    if holder.record_id is not None:
        row = access.read_record(holder, holder.record_id)
        page.records = shared_records([row], base, secret, today)
        page.embargoes = [row.sperrfrist] if access.embargo_active(row, today) else []
    else:
        found = keyset_page(Listing(holder, {}), cursor_arg("cursor"), KIT_PAGE_SIZE)
        page.records = shared_records(list(found.items), base, secret, today)
        if found.next_position is not None:
            page.more = page_url(request.path, cursor=encode_cursor(found.next_position))
        page.embargoes = running_embargoes(holder, today)
    services.note_use(link.id, download=False)
    return Response(render_page("pages/holder.html", page=page))


def _expired(expired: services.LinkExpired) -> Response:
    """410, naming when the link expired (in the reader's language), so the holder can ask
    for a new one."""
    expired_at = format_datetime(expired.expired_at, "long")
    body = render_page("pages/holder_expired.html", expired_at=expired_at)
    return Response(body, status=410)
