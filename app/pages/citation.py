"""The "Cite" box: a record's CSL-JSON item formatted by citeproc-py.

citeproc-py's own HTML formatter prints the record's values unescaped and small capitals as an
inline `style` (which the pages' Content-Security-Policy forbids). So the citation is rendered
with markers from Unicode's private use area around formatted text, the whole string is then
escaped once, and only the markers become the few tags below.

Rendering takes longer than the rest of a page, so a record's citation is rendered when the
record is written (app/pages/stored.py) with a placeholder for its address, kept with a key of
everything else it was made from, and a page uses it while the key still fits; otherwise it
renders the citation itself. The address is the DOI's where the record has one, else the
page's (the style prints either in the same place): a DOI reserved after the record was
written changes only the address, so the stored citation still fits.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from functools import cache
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from citeproc import Citation, CitationItem, CitationStylesBibliography, CitationStylesStyle
from citeproc.source.json import CiteProcJSON
from markupsafe import Markup, escape

from app.doi.lookup import url as doi_url

#: The project's compact CSL style: Harvard as "Cite them right" writes it (the style
#: citeproc-py ships, harvard-cite-them-right.csl) for a record, in a fraction of its time.
STYLE = Path(__file__).with_name("citation.csl")
#: citeproc-py's locale for each page language.
LOCALES = {"de": "de-DE", "en": "en-GB"}
#: Formatting citeproc may apply, as (opening marker, closing marker, opening tag, closing tag).
_TAGS = {
    "Italic": ("\ue000", "\ue001", "<i>", "</i>"),
    "Oblique": ("\ue000", "\ue001", "<i>", "</i>"),
    "Bold": ("\ue002", "\ue003", "<b>", "</b>"),
    "Underline": ("\ue004", "\ue005", "<u>", "</u>"),
    "Superscript": ("\ue006", "\ue007", "<sup>", "</sup>"),
    "Subscript": ("\ue008", "\ue009", "<sub>", "</sub>"),
    "SmallCaps": ("\ue00a", "\ue00b", '<span class="small-caps">', "</span>"),
}
_MARKERS = re.compile("[\ue000-\ue00b]")
#: Where a stored citation's address goes; like the markers, no value may carry it.
ADDRESS = "\ue0f0"
_NOT_CARRIED = re.compile("[\ue000-\ue00b\ue0f0]")
#: What a stored citation was rendered with besides the record: the style, this module and
#: citeproc-py. A new release of any makes every stored citation not fit.
VERSION = hashlib.sha256(
    STYLE.read_bytes() + Path(__file__).read_bytes() + metadata.version("citeproc-py").encode()
).hexdigest()
#: The item's values the style prints, besides the address (`URL`, or `DOI` where there is one).
PRINTED = (
    "type",
    "title",
    "author",
    "issued",
    "version",
    "publisher",
    "genre",
    "number",
    "collection-title",
    "collection-number",
)
_REPLACEMENTS = {
    marker: tag
    for opening, closing, opening_tag, closing_tag in _TAGS.values()
    for marker, tag in ((opening, opening_tag), (closing, closing_tag))
}


def _wrapper(opening: str, closing: str) -> type[str]:
    class Marked(str):
        def __new__(cls, text: str) -> Marked:
            return super().__new__(cls, f"{opening}{text}{closing}")

    return Marked


#: A citeproc-py formatter (it only needs these names).
MARKED = SimpleNamespace(
    preformat=lambda text: text,
    Light=str,
    **{name: _wrapper(opening, closing) for name, (opening, closing, _, _) in _TAGS.items()},
)


@cache
def _style(locale: str) -> tuple[CitationStylesStyle, threading.Lock]:
    """The parsed style of a locale (parsing takes longer than rendering), with a lock since
    citeproc-py keeps state in the style while it renders."""
    return CitationStylesStyle(str(STYLE), locale=locale, validate=False), threading.Lock()


def _without_markers(value: Any) -> Any:
    if isinstance(value, str):
        return _NOT_CARRIED.sub("", value)
    if isinstance(value, list):
        return [_without_markers(item) for item in value]
    if isinstance(value, dict):
        return {key: _without_markers(item) for key, item in value.items()}
    return value


def formatted_citation(item: dict[str, Any], language: str) -> Markup:
    """The bibliography entry of a CSL-JSON `item` in the style, as safe HTML."""
    return _render(_without_markers(item), language)


def _render(item: dict[str, Any], language: str) -> Markup:
    style, lock = _style(LOCALES.get(language, LOCALES["de"]))
    source = CiteProcJSON([item])
    with lock:
        bibliography = CitationStylesBibliography(style, source, MARKED)
        bibliography.register(Citation([CitationItem(item["id"])]))
        text = str(bibliography.bibliography()[0])
    escaped = str(escape(text))
    return Markup(_MARKERS.sub(lambda match: _REPLACEMENTS[match.group()], escaped))


def address_of(item: dict[str, Any]) -> str:
    """The address the style prints for `item`: its DOI's resolver address, else its URL."""
    doi = item.get("DOI")
    return doi_url(doi) if doi else item["URL"]


def citation_key(item: dict[str, Any]) -> str:
    """What a stored citation of `item` was made from: the values the style prints (but the
    address) and the renderer's version."""
    printed = {name: item.get(name) for name in PRINTED}
    text = json.dumps([VERSION, _without_markers(printed)], ensure_ascii=False, sort_keys=True)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def stored_citations(item: dict[str, Any]) -> dict[str, str]:
    """`item`'s citation in every page language with a placeholder for its address, and
    its key: what app/pages/stored.py keeps for a record. The files of one upload mostly
    share what their citation prints, so they share one rendering."""
    key = citation_key(item)
    with _RENDERED_LOCK:
        stored = _RENDERED.get(key)
    if stored is None:
        clean = {**_without_markers(item), "URL": ADDRESS}
        clean.pop("DOI", None)
        stored = {language: str(_render(clean, language)) for language in LOCALES}
        with _RENDERED_LOCK:
            _RENDERED[key] = stored
            while len(_RENDERED) > RENDERED_KEPT:
                del _RENDERED[next(iter(_RENDERED))]
    return {"key": key, **stored}


#: Renderings kept by key, oldest dropped first: a few hundred KiB at most.
RENDERED_KEPT = 256
_RENDERED: dict[str, dict[str, str]] = {}
_RENDERED_LOCK = threading.Lock()


def page_citation(item: dict[str, Any], stored: dict[str, str] | None, language: str) -> Markup:
    """The Cite box of a page: the stored citation with the item's address (its DOI's or its
    page's) where it still fits `item` (the same text, a test compares them), else rendered
    now."""
    if stored is None or stored["key"] != citation_key(item) or language not in stored:
        return formatted_citation(item, language)
    address = str(escape(_NOT_CARRIED.sub("", address_of(item))))
    return Markup(stored[language].replace(ADDRESS, address))
