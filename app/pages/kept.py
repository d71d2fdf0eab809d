"""Record pages rendered when their record is written, so that a view only fills them in.

A record page costs most of its time in computing its values and rendering its template, yet
almost all of it follows from the record: what changes from view to view is the address the
reader reached the service by (and its mount point), the link to the page in the other
language (which keeps the request's parameters) and the reach figures. So the record's write
(app/pages/stored.py, beside its citation) renders the whole page in each page language with
placeholders for those, and keeps it with a key of everything else it prints (`page_key`); a
CSV's first rows are read then too. A view whose kept page still fits puts them in (`filled`)
and renders no template (the reach's lines are written by `records.reach_markup`; only a CSV
whose rows could not be read then gets its table rendered); one whose page is missing or
stale renders it itself. Either way the page is the same, byte for byte
(tests/pages/test_kept_pages.py), since both come from the same templates.

The placeholders are characters of Unicode's private use area, which `records.clean_text`
drops from every value a page prints, so no value can pose as one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote_plus

from flask import current_app, render_template
from flask_babel import force_locale
from markupsafe import Markup, escape

from app.files.access import RecordLike, embargo_active
from app.oai.routes import identifier_of
from app.pages import citation, exports, i18n
from app.pages.blueprint import kept_frame
from app.pages.previews import read_csv_rows
from app.pages.records import (
    BASE,
    LANGUAGE_LINK,
    REACH,
    SCRIPT,
    TABLE,
    RecordPage,
    Urls,
    kind_of,
    record_page,
)
from app.storage import ObjectNotFound, StorageError

#: Where a view puts the reach figures, and a CSV's rows when they could not be read when
#: the page was kept, as the template sees them (`keeping.reach`, ...).
PLACEHOLDERS = {
    "reach": Markup(REACH),
    "table": Markup(TABLE),
    "language_link": Markup(LANGUAGE_LINK),
}
#: An address that reads the same in HTML text, attributes and the JSON-LD: one with none of
#: the characters either escapes (a URL has none; anything else renders the page itself).
_PLAIN_ADDRESS = re.compile(r"[^&<>\"'\\\x00-\x1f\x7f\ue000-\uf8ff]*")
#: A mount point `url_for` writes as it is.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9/._~-]*")


def _digest_of_files(*folders: Path) -> str:
    """A digest of the templates and assets (folders or single files): a new release of them
    changes every ETag and every kept page (the same on every replica)."""
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
    "Babel",
    "flask-babel",
    "Jinja2",
    "MarkupSafe",
)
LAYOUT_DIGEST = _digest_of_files(*LAYOUT_INPUTS) + "".join(
    metadata.version(name) for name in LAYOUT_LIBRARIES
)


def page_urls(record_id: Any, path: str | None, base: str) -> Urls:
    """The addresses a record's page links to, under `base` (the service's, or `BASE`)."""
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


def export_links(page_url: str) -> list[tuple[str, str, str]]:
    """(label, address, media type) of each export of the page at `page_url`."""
    return [
        (export.label, f"{page_url}/export/{export.name}", export.media_type)
        for export in exports.EXPORTS.values()
    ]


def page_of(record: RecordLike, today: date, base: str, repository: str) -> RecordPage:
    """The values of a record's page and its exports' addresses."""
    page = record_page(record, today, page_urls(record.id, record.path, base), repository)
    page.exports = export_links(page.urls.page)
    return page


#: The record's values a kept page prints (with its id, which the key holds anyway).
PRINTED = (
    "titel",
    "original_name",
    "autoren",
    "created_at",
    "beschreibung",
    "sachschlagwoerter",
    "org_themen",
    "path",
    "mime_type",
    "size",
    "checksum_sha256",
    "sperrfrist",
)


def page_key(record: RecordLike, embargoed: bool, repository: str, citation_key: str) -> str:
    """What a kept page was made from: the values it prints, whether the embargo held, the
    repository's name, the OAI-PMH namespace (its identifiers), the citation's key and the
    layout (templates, code, libraries)."""
    values = [str(getattr(record, name)) for name in PRINTED]
    namespace = current_app.config["OAI_NAMESPACE"]
    # `repr` of strings and a bool: unambiguous, as JSON would be, in two thirds of its time.
    text = repr((str(record.id), values, embargoed, repository, namespace, citation_key))
    return hashlib.blake2b((text + LAYOUT_DIGEST).encode(), digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class Kept:
    """A record's pages in each language, with the key they were made with."""

    key: str
    texts: dict[str, str]


def kept_pages(
    record: RecordLike, today: date, repository: str, kept_citation: dict[str, str]
) -> Kept:
    """Render a record's page parts in every language, its citation the one just kept.
    Needs an app context, no request (a write from the CLI keeps its pages too)."""
    embargoed = embargo_active(record, today)
    keeping = SimpleNamespace(**PLACEHOLDERS)
    table: list[list[str]] = []
    if kind_of(record.mime_type) == "csv" and not embargoed:
        try:  # read once now, not at every view (a ranged GET of S3 each time)
            table = read_csv_rows(
                current_app.extensions["storage"], record.stored_path, record.size
            )
            keeping.table = None
        except ObjectNotFound:
            keeping.table = None  # no content: no table, as a view would show
        except StorageError:
            pass  # unreachable now: the view reads it (`TABLE` stays)
    texts = {}
    for language in i18n.LANGUAGES:
        with force_locale(language):
            page = page_of(record, today, BASE, repository)
            page.table = table
            item = exports.csl_item(page)
            page.citation = citation.page_citation(item, kept_citation, language)
            template = i18n.page_templates(language).get_template("pages/record.html")
            texts[language] = render_template(
                template, page=page, keeping=keeping, frame=kept_frame(SCRIPT)
            )
    return Kept(page_key(record, embargoed, repository, kept_citation["key"]), texts)


def fits(text: str | None, key: str | None, wanted: str | None, base: str, root: str) -> bool:
    """Whether a kept page can stand for the page: kept, made from what the page shows, and
    the reader's address and mount point read the same in every place they go."""
    return (
        bool(text)
        and key is not None
        and key == wanted
        and _PLAIN_ADDRESS.fullmatch(base) is not None
        and _PLAIN_PATH.fullmatch(root) is not None
    )


def filled(
    text: str, base: str, root: str, language_url: Callable[[str], str], reach: str, table: str
) -> str:
    """A kept page with the address, mount point, link to the other language (its address
    from `language_url(code)`), reach and table put in."""
    page = _put(text.replace(BASE, base), SCRIPT, root)
    at = page.find(LANGUAGE_LINK)
    while at >= 0:
        code = next((code for code in i18n.LANGUAGES if page.startswith(code, at + 1)), None)
        if code is not None:
            page = f"{page[:at]}{escape(language_url(code))}{page[at + 1 + len(code) :]}"
        at = page.find(LANGUAGE_LINK, at + 1)
    return _put(_put(page, REACH, reach), TABLE, table)


def _put(page: str, placeholder: str, value: str) -> str:
    """`page.replace(placeholder, value)` for a placeholder found a few times or not at all,
    in a fraction of its time: Python finds a character fast, but `replace` first counts them
    one character at a time (a tenth of a page's view, on a page with non-Latin-1 text)."""
    at = page.find(placeholder)
    if at < 0:
        return page
    parts, start = [], 0
    while at >= 0:
        parts.append(page[start:at])
        start = at + len(placeholder)
        at = page.find(placeholder, start)
    parts.append(page[start:])
    return str(value).join(parts)  # not Markup.join, which would escape the page
