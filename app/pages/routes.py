"""The landing pages' views: read what the public API reads, compute the page, render it."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import UTC, date
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

from flask import Response, current_app, request
from flask_babel import gettext as _
from sqlalchemy import Row, bindparam, func, literal_column, select
from werkzeug.exceptions import NotFound

from app.covers import services as covers
from app.database import PREPARED
from app.doi import lookup
from app.exceptions import RecordNotFound
from app.extensions import db
from app.files import access, relations, versions
from app.files.downloads import OFFLOAD_DISPOSITION, download_response
from app.http import PUBLIC_CACHE, base_url, external_url
from app.links.holder import HOLDER_HEADERS, is_holder_page
from app.models import FileRecord, RecordCitation, Series, StatsDaily, record_digest
from app.oai.identifiers import identifier_of
from app.pages import (  # noqa: F401
    browse,
    citation,
    dcat,
    exports,
    front,
    holder,
    i18n,
    pictures,
    series,
    sitemap,
    tombstones,
)
from app.pages.blueprint import bp
from app.pages.errors import is_page
from app.pages.i18n import render_page
from app.pages.previews import csv_rows
from app.pages.records import (
    KeptVersion,
    RecordPage,
    SeriesRef,
    ShownLink,
    Urls,
    clean_text,
    kind_of,
    link_header,
    record_page,
    schema_type,
    signposting,
    size_text,
    title_of,
)
from app.stats import count_view
from app.stats.queries import human

#: Only the app's own assets; the JSON-LD (`application/ld+json`) is data, never executed.
CONTENT_SECURITY_POLICY = "default-src 'self'; base-uri 'none'; form-action 'self'"
#: The PDF preview is sandboxed by its own answer (no scripts, a unique origin): Chromium
#: refuses to show a PDF at all in a frame sandboxed by the embedding page's `sandbox`
#: attribute, but shows it under this header.
PREVIEW_POLICY = f"{CONTENT_SECURITY_POLICY}; sandbox"


def _digest_of_files(*folders: Path) -> str:
    """A digest of the templates and assets (folders or single files): a new release of them
    changes every ETag (the same on every replica, as it depends on their content only)."""
    digest = hashlib.sha256()
    for folder in folders:
        for file in sorted(folder.rglob("*")) if folder.is_dir() else [folder]:
            if file.is_file():
                digest.update(file.relative_to(folder.parent).as_posix().encode() + b"\0")
                digest.update(file.read_bytes())
    return digest.hexdigest()


HERE = Path(__file__).parent
#: What builds a page or an export besides the record: templates, assets, translations, the
#: citation's style, the page modules and the OAI-PMH writer the Dublin Core export uses.
LAYOUT_INPUTS = (
    HERE / "templates",
    HERE / "static",
    i18n.CATALOGUES,
    citation.STYLE,
    *sorted(HERE.glob("*.py")),
    HERE.parent / "oai" / "xml.py",
)
#: ... and the libraries that write them: a new release of any changes every ETag.
LAYOUT_LIBRARIES = (
    "citeproc-py",
    "bibtexparser",
    "rispy",
    "datacite",
    "rdflib",
    "Babel",
    "flask-babel",
    "Jinja2",
    "MarkupSafe",
)
LAYOUT_DIGEST = _digest_of_files(*LAYOUT_INPUTS) + "".join(
    metadata.version(name) for name in LAYOUT_LIBRARIES
)


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
_NONE = literal_column("0")


def _reach_of(page_views: bool) -> Any:
    """Downloads (or page views) of the record by people so far, as the public figures count
    them (app/stats/queries.py): the public door's downloads only, never what share links
    or accounts fetched before the release."""
    return (
        select(func.coalesce(func.sum(StatsDaily.total), _NONE))
        .where(StatsDaily.record_id == FileRecord.id, human(views=page_views, public=True))
        .scalar_subquery()
    )


_CITATIONS = RecordCitation.__table__
#: The stored Cite box a page's read carries (`_READ_PAGE`): part of the page's version.
_CITATION_COLUMNS = ("citation_key", "citation_de", "citation_en")
#: Everything a page reads in one round trip, built once: the record, its stored citation
#: (app/pages/stored.py) and its reach; prepared on PostgreSQL (a primary-key lookup).
_READ_PAGE = (
    select(
        *FileRecord.__table__.columns,
        _CITATIONS.c.key.label("citation_key"),
        _CITATIONS.c.de.label("citation_de"),
        _CITATIONS.c.en.label("citation_en"),
        _reach_of(page_views=False).label("reach_downloads"),
        _reach_of(page_views=True).label("reach_views"),
    )
    .outerjoin(_CITATIONS, _CITATIONS.c.record_id == FileRecord.id)
    .where(FileRecord.id == bindparam("record_id"))
    .execution_options(**{PREPARED: True})
)


def _page_row(record_id: uuid.UUID) -> Row[Any]:
    """The record the public may see with what only its page shows (`_READ_PAGE`)."""
    row = db.session.connection().execute(_READ_PAGE, {"record_id": record_id}).first()
    if row is None or not access.may_see(None, row):
        raise RecordNotFound()
    return row


def page_urls(record_id: Any, path: str | None, base: str) -> Urls:
    """The addresses a record's page links to, under the service's address `base`."""
    record_id = str(record_id)  # once: a UUID writes itself out slowly
    page = f"{base}/records/{record_id}"
    # As `urlencode` writes them (quote_plus), in a third of its time.
    oai = f"verb=GetRecord&metadataPrefix=oai_dc&identifier={quote_plus(identifier_of(record_id))}"
    feed = f"?path={quote_plus(path)}" if path else ""
    return Urls(
        page=page,
        download=f"{base}/api/public/files/{record_id}/download",
        record_json=f"{base}/api/public/files/{record_id}",
        preview=f"{page}/preview",
        oai_record=f"{base}/oai?{oai}",
        folder_feed=f"{base}/api/public/feed.atom{feed}",
        podcast_feed=f"{base}/api/public/podcast.rss",
    )


def page_of(record: Any, today: date, repository: str, doi: str | None = None) -> RecordPage:
    """The values of a record's page and its exports' addresses; `doi` its DOI as readers
    see it (app/doi/lookup.py)."""
    urls = page_urls(record.id, record.path, base_url())
    # The folders' pages where the folder pages link them (app/pages/browse.py: `folder_url`).
    folders = external_url(f"{request.script_root}/browse/")
    changed = None
    if record.version > 1:
        replaced = versions.last_replaced_at(record.id)
        changed = replaced.astimezone(UTC).date() if replaced else None
    # Shown only where the public may download the content (app/covers).
    cover = covers.shown(record) if access.public_now(record, today) else None
    base = base_url()
    page = record_page(
        record,
        today,
        urls,
        repository,
        folders,
        changed,
        doi,
        covers.shown_at(cover, urls.page),
        links=shown_links(record, base),
        series=series_of(record, base),
    )
    if record.version > 1:
        page.kept_versions = [
            KeptVersion(
                number=kept.number,
                replaced=kept.replaced_at.astimezone(UTC).date(),
                note=clean_text(kept.change_note),
                sha256=kept.checksum_sha256,
                size_text=size_text(kept.size),
                download=f"{urls.record_json}/versions/{kept.number}/download",
            )
            for kept in versions.kept_versions(record.id)
        ]
    page.exports = [
        (export.label, f"{page.urls.page}/export/{export.name}", export.media_type)
        for export in exports.EXPORTS.values()
    ]
    return page


def series_of(record: Any, base: str) -> SeriesRef | None:
    """The series the record is part of, with its title and its number there."""
    found = db.session.get(Series, record.series_slug) if record.series_slug else None
    if found is None:
        return None
    url = f"{base}/series/{found.slug}"
    return SeriesRef(found.slug, clean_text(found.title), clean_text(record.series_number), url)


def shown_links(record: Any, base: str) -> list[ShownLink]:
    """The record's links the public may follow (app/files/relations.py), each with what
    its page prints: a linked record's title, page and DOI; a DOI's or URL's address."""
    found = relations.links_of(record, None)
    dois = lookup.dois_of(link.target.id for link in found if link.target is not None)
    shown = []
    for link in found:
        if link.target is None:
            href = lookup.url(link.identifier) if link.identifier_type == "DOI" else link.identifier
            shown.append(
                ShownLink(link.relation_type, link.identifier_type, link.identifier, href, href)
            )
            continue
        target = link.target
        shown.append(
            ShownLink(
                link.relation_type,
                link.identifier_type,
                link.identifier,
                title_of(target),
                f"{base}/records/{target.id}",
                record_id=str(target.id),
                schema_type=schema_type(target.mime_type),
                doi=lookup.shown(dois.get(target.id)),
                inverse=link.inverse,
            )
        )
    return shown


def _version(row: Any, today: date, page: RecordPage, repository: str) -> tuple[str, ...]:
    """What a page's or export's ETag is made of, besides the layout (and for a page its
    reach and language)."""
    return (
        record_digest(row, *(_CITATION_COLUMNS if "citation_key" in row._fields else ())),
        str(access.embargo_active(row, today)),
        page.urls.page,
        page.urls.oai_record,
        repository,
        page.doi or "",
        "" if page.cover is None else page.cover.url(1200, "jpg") + str(page.cover.height),
        repr(page.links),  # what other records lend it: their titles, types, DOIs
        repr(page.series),  # and its series' title
    )


def _read(record_id: uuid.UUID, *, for_page: bool = False) -> Read:
    """The record as the public API reads it (for a page with its stored citation and reach,
    `_READ_PAGE`), its DOI, and its page's values."""
    row = _page_row(record_id) if for_page else access.read_record(None, record_id)
    today = access.today()
    repository = current_app.config["REPOSITORY_NAME"]
    page = page_of(row, today, repository, lookup.shown(lookup.doi_of(row.id)))
    return Read(row, today, page, _version(row, today, page, repository))


@bp.get("/records/<uuid:record_id>")
@tombstones.answered
def record(record_id: uuid.UUID) -> Response:
    """The page, or by content negotiation (`Accept`) one of the exports."""
    offers = exports.OFFERS
    if request.accept_mimetypes and any(t in request.accept_mimetypes for t in dcat.FORMATS):
        # A data set also answers its DCAT-AP description (an unknown id is 404 here).
        if schema_type(access.read_record(None, record_id).mime_type) == "Dataset":
            offers = [*offers, *dcat.FORMATS]
    wanted = request.accept_mimetypes.best_match(offers) if request.accept_mimetypes else None
    if request.accept_mimetypes and wanted is None:
        _read(record_id)  # an unknown id is 404 whatever was asked for
        response = not_acceptable(offers)
    elif wanted in exports.BY_MEDIA_TYPE:
        response = _export(_read(record_id), exports.BY_MEDIA_TYPE[wanted])
    elif wanted in dcat.FORMATS:
        response = _dcat(_read(record_id), wanted)
    else:
        response = _page(_read(record_id, for_page=True))
    response.vary.add("Accept")
    return response


def _dcat(read: Read, media_type: str) -> Response:
    """A data set's DCAT-AP description (app/pages/dcat.py), with an ETag of its own."""
    etag = _etag(*read.version, media_type)
    if request.if_none_match.contains_weak(etag):
        response = Response(status=304)
    else:
        body = dcat.serialized(read.page, media_type)
        response = Response(body, content_type=f"{media_type}; charset=utf-8")
    response.set_etag(etag)
    return response


def _page(read: Read) -> Response:
    """The page, rendered from its one read; the citation is the stored one where it still
    fits the record (app/pages/citation.py), else rendered now."""
    page, row = read.page, read.row
    language = i18n.page_language()
    # While the public may not have the content (an embargo), how often it was fetched
    # (through share links, by its owner) is not the public's to know: the owner's
    # statistics show it.
    page.reach = _reach(row) if page.downloadable else None
    etag = _etag(*read.version, repr(page.reach), language)
    if request.if_none_match.contains_weak(etag):
        response = Response(status=304)
    else:
        if page.kind == "csv" and page.downloadable:
            storage = current_app.extensions["storage"]
            page.table = csv_rows(storage, row.stored_path, row.size)
        stored = None
        if row.citation_key is not None:
            stored = {"key": row.citation_key, "de": row.citation_de, "en": row.citation_en}
        page.citation = citation.page_citation(exports.csl_item(page), stored, language)
        response = Response(render_page("pages/record.html", page=page))
    response.set_etag(etag)
    response.headers["Link"] = link_header(signposting(page))
    count_view(row.id, response.status_code)
    return response


def _reach(row: Row[Any]) -> tuple[int, int] | None:
    """Downloads and page views by people so far, where statistics are kept and public."""
    config = current_app.config
    if config["STATS"] != "on" or config["STATS_PUBLIC"] != "on":
        return None
    return int(row.reach_downloads), int(row.reach_views)


@bp.get("/records/<uuid:record_id>/export/<name>")
@tombstones.answered
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


def not_acceptable(offers: list[str] | None = None) -> Response:
    """406 with the list of what `/records/{id}` can answer."""
    lines = [_("Diese Seite gibt es in diesen Formaten (Accept):"), *(offers or exports.OFFERS)]
    return Response("\n".join(lines) + "\n", status=406, content_type="text/plain; charset=utf-8")


@bp.get("/records/<uuid:record_id>/preview")
@tombstones.answered
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
    return hashlib.sha256("\0".join((*parts, LAYOUT_DIGEST)).encode()).hexdigest()[:32]


# The other pages join this blueprint (their modules import `bp`).
