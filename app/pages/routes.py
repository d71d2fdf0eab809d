"""The landing pages' views: read what the public API reads, compute the page, render it."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import date
from types import SimpleNamespace
from typing import Any

from flask import Response, current_app, request
from flask_babel import gettext as _
from sqlalchemy import Row, bindparam, case, func, literal_column, select
from werkzeug.exceptions import NotFound

from app.database import PREPARED
from app.exceptions import RecordNotFound
from app.extensions import db
from app.files import access
from app.files.downloads import OFFLOAD_DISPOSITION, download_response
from app.http import PUBLIC_CACHE, base_url
from app.links.holder import HOLDER_HEADERS, is_holder_page
from app.models import FileRecord, RecordCitation, StatsDaily
from app.pages import browse, citation, exports, holder, i18n, kept, sitemap, stored  # noqa: F401
from app.pages.blueprint import bp
from app.pages.errors import is_page
from app.pages.i18n import render_page
from app.pages.previews import csv_rows
from app.pages.records import (
    TABLE,
    RecordPage,
    Urls,
    kind_of,
    link_header,
    reach_markup,
    signposting,
)
from app.stats import count_view
from app.stats.events import PAGE

#: Only the app's own assets; the JSON-LD (`application/ld+json`) is data, never executed.
CONTENT_SECURITY_POLICY = "default-src 'self'; base-uri 'none'; form-action 'self'"
#: The PDF preview is sandboxed by its own answer (no scripts, a unique origin): Chromium
#: refuses to show a PDF at all in a frame sandboxed by the embedding page's `sandbox`
#: attribute, but shows it under this header.
PREVIEW_POLICY = f"{CONTENT_SECURITY_POLICY}; sandbox"


@bp.after_app_request
def page_headers(response: Response) -> Response:
    """Every answer under a page path (errors and unmatched ids too) is cacheable, confined
    by the policy (a view may make it stricter) and never sniffed."""
    if is_page(request.path):
        response.headers["Cache-Control"] = PUBLIC_CACHE
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "strict-origin-when-cross-origin"
        response.vary.add("Accept-Language")
        if is_holder_page(request.path):
            response.headers.update(HOLDER_HEADERS)
    return response


@dataclass(frozen=True, slots=True)
class Read:
    """A record as the public reads it, the page computed from it, and the parts of its ETag."""

    row: Any
    today: date
    page: RecordPage
    version: tuple[str, ...]


#: Constants written into the page's read, not sent as parameters with every execution.
_PAGE_DOOR = literal_column(f"'{PAGE}'")  # a word of the code (app/stats/events.py)
_NONE, _ENGLISH = literal_column("0"), literal_column("'en'")


def _reach_of(page_views: bool) -> Any:
    """Downloads (or page views) of the record by people so far, as `record_totals` counts
    them (app/stats/queries.py)."""
    door = StatsDaily.door == _PAGE_DOOR if page_views else StatsDaily.door != _PAGE_DOOR
    return (
        select(func.coalesce(func.sum(StatsDaily.total), _NONE))
        .where(StatsDaily.record_id == FileRecord.id, StatsDaily.machine.is_(False), door)
        .scalar_subquery()
    )


_CITATIONS = RecordCitation.__table__
#: Everything a page reads in one round trip, built once: the record, its kept citation and
#: page (app/pages/stored.py) and its reach; prepared on PostgreSQL (a primary-key lookup),
#: with two parameters (the id and the language: 20 us less than seven).
_READ_PAGE = (
    select(
        *FileRecord.__table__.columns,
        _CITATIONS.c.key.label("citation_key"),
        _CITATIONS.c.de.label("citation_de"),
        _CITATIONS.c.en.label("citation_en"),
        _CITATIONS.c.page_key,
        # Only the page's language: a kept page is a few kilobytes, compressed in its row.
        case(
            (bindparam("language") == _ENGLISH, _CITATIONS.c.page_en), else_=_CITATIONS.c.page_de
        ).label("page_text"),
        _reach_of(page_views=False).label("reach_downloads"),
        _reach_of(page_views=True).label("reach_views"),
    )
    .outerjoin(_CITATIONS, _CITATIONS.c.record_id == FileRecord.id)
    .where(FileRecord.id == bindparam("record_id"))
    .execution_options(**{PREPARED: True})
)


def _page_row(record_id: uuid.UUID, language: str) -> Row[Any]:
    """The record the public may see with what only its page shows (`_READ_PAGE`), its kept
    page in `language`."""
    values = {"record_id": record_id, "language": language}
    row = db.session.connection().execute(_READ_PAGE, values).first()
    if row is None or not access.may_see(None, row):
        raise RecordNotFound()
    return row


def _version(row: Any, today: date, urls: Urls, repository: str) -> tuple[str, ...]:
    """What a page's or export's ETag is made of, besides the layout (and for a page its
    reach and language)."""
    return (
        str(row.id),
        row.updated_at.isoformat(),
        str(access.embargo_active(row, today)),
        urls.page,
        urls.oai_record,
        repository,
    )


def _read(record_id: uuid.UUID) -> Read:
    """The record as the public API reads it, with its page's values (for the exports)."""
    row = access.read_record(None, record_id)
    today = access.today()
    repository = current_app.config["REPOSITORY_NAME"]
    page = kept.page_of(row, today, base_url(), repository)
    return Read(row, today, page, _version(row, today, page.urls, repository))


@bp.get("/records/<uuid:record_id>")
def record(record_id: uuid.UUID) -> Response:
    """The page, or by content negotiation (`Accept`) one of the exports."""
    wanted = (
        request.accept_mimetypes.best_match(exports.OFFERS) if request.accept_mimetypes else None
    )
    if request.accept_mimetypes and wanted is None:
        _read(record_id)  # an unknown id is 404 whatever was asked for
        response = not_acceptable()
    elif wanted in exports.BY_MEDIA_TYPE:
        response = _export(_read(record_id), exports.BY_MEDIA_TYPE[wanted])
    else:
        language = i18n.page_language()
        response = _page(_page_row(record_id, language), language)
    response.vary.add("Accept")
    return response


def _page(row: Row[Any], language: str) -> Response:
    """The page in `language`: its kept parts filled in where they still fit
    (app/pages/kept.py), else rendered now; the same page either way."""
    today = access.today()
    repository = current_app.config["REPOSITORY_NAME"]
    base = base_url()
    urls = kept.page_urls(row.id, row.path, base)
    reach = _reach(row)
    embargoed = access.embargo_active(row, today)
    etag = _etag(*_version(row, today, urls, repository), repr(reach), language)
    links = SimpleNamespace(  # what signposting reads of a page
        urls=urls,
        exports=kept.export_links(urls.page),
        mime_type=row.mime_type,
        kind=kind_of(row.mime_type),
        downloadable=not embargoed,
    )
    if request.if_none_match.contains_weak(etag):
        response = Response(status=304)
    else:
        key = row.page_key and kept.page_key(row, embargoed, repository, row.citation_key)
        text, root = row.page_text, request.script_root
        if kept.fits(text, row.page_key, key, base, root):
            table = _table(row) if TABLE in text else None
            filling = SimpleNamespace(table=table)
            body = kept.filled(
                text,
                base,
                root,
                i18n.language_url,
                reach_markup(reach, language) if reach else "",
                i18n.render_fragment("pages/_table.html", page=filling) if table else "",
            )
            response = Response(body)
        else:
            table = _table(row) if links.kind == "csv" and links.downloadable else None
            page = _live(row, today, base, repository, reach, table, language)
            response = Response(render_page("pages/record.html", page=page))
    response.set_etag(etag)
    response.headers["Link"] = link_header(signposting(links))  # type: ignore[arg-type]
    count_view(row.id, response.status_code)
    return response


def _table(row: Row[Any]) -> list[list[str]]:
    """A CSV's first rows for its page (none when its content cannot be read)."""
    return csv_rows(current_app.extensions["storage"], row.stored_path, row.size)


def _live(
    row: Row[Any],
    today: date,
    base: str,
    repository: str,
    reach: tuple[int, int] | None,
    table: list[list[str]] | None,
    language: str,
) -> RecordPage:
    """The page's values, for a page rendered as it is viewed."""
    page = kept.page_of(row, today, base, repository)
    page.reach = reach
    page.table = table or []
    cited = None
    if row.citation_key is not None:
        cited = {"key": row.citation_key, "de": row.citation_de, "en": row.citation_en}
    page.citation = citation.page_citation(exports.csl_item(page), cited, language)
    return page


def _reach(row: Row[Any]) -> tuple[int, int] | None:
    """Downloads and page views by people so far, where statistics are kept and public."""
    config = current_app.config
    if config["STATS"] != "on" or config["STATS_PUBLIC"] != "on":
        return None
    return int(row.reach_downloads), int(row.reach_views)


@bp.get("/records/<uuid:record_id>/export/<name>")
def export(record_id: uuid.UUID, name: str) -> Response:
    """One export as a download (`/records/{id}/export/bibtex`, ...)."""
    read = _read(record_id)
    if name not in exports.EXPORTS:
        raise NotFound()
    return _export(read, exports.EXPORTS[name])


def _export(read: Read, chosen: exports.Export) -> Response:
    etag = _etag(*read.version, chosen.name)
    if request.if_none_match.contains_weak(etag):
        response = Response(status=304)
    else:
        body = chosen.write(read.page, read.row, read.today)
        response = Response(body, content_type=f"{chosen.media_type}; charset=utf-8")
        filename = f"record-{read.page.id}.{chosen.extension}"
        response.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    response.set_etag(etag)
    return response


def not_acceptable() -> Response:
    """406 with the list of what `/records/{id}` can answer."""
    lines = [_("Diese Seite gibt es in diesen Formaten (Accept):"), *exports.OFFERS]
    return Response("\n".join(lines) + "\n", status=406, content_type="text/plain; charset=utf-8")


@bp.get("/records/<uuid:record_id>/preview")
def preview(record_id: uuid.UUID) -> Response:
    """A PDF for the page's frame: the public download, but `inline`, since a browser saves
    an attachment instead of showing it. Only PDFs; the same rules (404, 403 under embargo)."""
    if kind_of(access.read_record(None, record_id).mime_type) != "pdf":
        raise RecordNotFound()
    storage = current_app.extensions["storage"]
    response = download_response(request, None, record_id, storage, PUBLIC_CACHE)
    for name in ("Content-Disposition", OFFLOAD_DISPOSITION):
        if name in response.headers:
            disposition = response.headers[name].removeprefix("attachment")
            response.headers[name] = "inline" + disposition
    response.headers["Content-Security-Policy"] = PREVIEW_POLICY
    return response


def _etag(*parts: str) -> str:
    """The page's version: the record's, whether its embargo is over, the language, and the
    layout's (templates, assets and translations)."""
    return hashlib.sha256("\0".join((*parts, kept.LAYOUT_DIGEST)).encode()).hexdigest()[:32]


# The other pages join this blueprint (their modules import `bp`).
