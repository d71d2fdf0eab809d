"""The landing pages' views: read what the public API reads, compute the page, render it."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

from flask import Blueprint, Response, current_app, render_template, request

from app.database import read_without_transaction
from app.exceptions import RecordNotFound
from app.files import access
from app.files.downloads import OFFLOAD_DISPOSITION, download_response
from app.http import external_url
from app.links.routes import HOLDER_HEADERS
from app.oai.routes import identifier_of
from app.pages import i18n
from app.pages.errors import is_holder_page, is_page
from app.pages.previews import csv_rows
from app.pages.records import Urls, kind_of, link_header, record_page, signposting

#: The public API's caching: shared caches may keep a page but must ask again before reuse.
PUBLIC_CACHE = "public, max-age=0, must-revalidate"
#: Only the app's own assets; the JSON-LD (`application/ld+json`) is data, never executed.
CONTENT_SECURITY_POLICY = "default-src 'self'; base-uri 'none'; form-action 'self'"

bp = Blueprint(
    "pages",
    __name__,
    template_folder="templates",
    static_folder="static",
    static_url_path="/static/pages",
)
bp.before_request(read_without_transaction)


@bp.record_once
def _tidy_templates(state) -> None:  # type: ignore[no-untyped-def]
    """Block tags leave no blank lines behind (the pages are the app's only templates)."""
    state.app.jinja_env.trim_blocks = True
    state.app.jinja_env.lstrip_blocks = True


def _digest_of_files(*folders: Path) -> str:
    """A digest of the templates and assets: a new release of them changes every ETag (the
    same on every replica, as it depends on their content only)."""
    digest = hashlib.sha256()
    for folder in folders:
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                digest.update(file.relative_to(folder.parent).as_posix().encode() + b"\0")
                digest.update(file.read_bytes())
    return digest.hexdigest()


HERE = Path(__file__).parent
LAYOUT_DIGEST = _digest_of_files(HERE / "templates", HERE / "static", i18n.CATALOGUES)


@bp.after_app_request
def page_headers(response: Response) -> Response:
    """Every answer under a page path (errors and unmatched ids too) is cacheable, confined
    by the policy and never sniffed."""
    if is_page(request.path):
        response.headers["Cache-Control"] = PUBLIC_CACHE
        response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "strict-origin-when-cross-origin"
        response.vary.add("Accept-Language")
        if is_holder_page(request.path):
            response.headers.update(HOLDER_HEADERS)
    return response


@bp.get("/records/<uuid:record_id>")
def record(record_id: uuid.UUID) -> Response:
    row = access.read_record(None, record_id)
    today = access.today()
    repository = current_app.config["REPOSITORY_NAME"]
    urls = Urls(
        page=external_url(f"/records/{row.id}"),
        download=external_url(f"/api/public/files/{row.id}/download"),
        record_json=external_url(f"/api/public/files/{row.id}"),
        preview=external_url(f"/records/{row.id}/preview"),
        oai_record=external_url(
            "/oai",
            [
                ("verb", "GetRecord"),
                ("metadataPrefix", "oai_dc"),
                ("identifier", identifier_of(row.id)),
            ],
        ),
        folder_feed=external_url(
            "/api/public/feed.atom", [("path", row.path)] if row.path else None
        ),
    )
    etag = _etag(
        str(row.id),
        row.updated_at.isoformat(),
        str(access.embargo_active(row, today)),
        urls.page,
        urls.oai_record,
        repository,
        i18n.page_language(),
    )
    page = record_page(row, today, urls, repository)
    if request.if_none_match.contains(etag):
        response = Response(status=304)
    else:
        if page.kind == "csv" and page.downloadable:
            page.table = csv_rows(current_app.extensions["storage"], row.stored_path, row.size)
        response = Response(render_template("pages/record.html", page=page))
    response.set_etag(etag)
    response.headers["Link"] = link_header(signposting(page))
    return response


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
    return response


def _etag(*parts: str) -> str:
    """The page's version: the record's, whether its embargo is over, the language, and the
    layout's (templates, assets and translations)."""
    return hashlib.sha256("\0".join((*parts, LAYOUT_DIGEST)).encode()).hexdigest()[:32]


# The other pages join this blueprint (their modules import `bp`).
from app.pages import browse, holder, sitemap  # noqa: E402, F401
