"""The "Cite" box: a record's CSL-JSON item formatted by citeproc-py.

citeproc-py's own HTML formatter prints the record's values unescaped and small capitals as an
inline `style` (which the pages' Content-Security-Policy forbids). So the citation is rendered
with markers from Unicode's private use area around formatted text, the whole string is then
escaped once, and only the markers become the few tags below.
"""

from __future__ import annotations

import re
import threading
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from citeproc import Citation, CitationItem, CitationStylesBibliography, CitationStylesStyle
from citeproc.source.json import CiteProcJSON
from markupsafe import Markup, escape

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
        return _MARKERS.sub("", value)
    if isinstance(value, list):
        return [_without_markers(item) for item in value]
    if isinstance(value, dict):
        return {key: _without_markers(item) for key, item in value.items()}
    return value


def formatted_citation(item: dict[str, Any], language: str) -> Markup:
    """The bibliography entry of a CSL-JSON `item` in the style, as safe HTML."""
    style, lock = _style(LOCALES.get(language, LOCALES["de"]))
    source = CiteProcJSON([_without_markers(item)])
    with lock:
        bibliography = CitationStylesBibliography(style, source, MARKED)
        bibliography.register(Citation([CitationItem(item["id"])]))
        text = str(bibliography.bibliography()[0])
    escaped = str(escape(text))
    return Markup(_MARKERS.sub(lambda match: _REPLACEMENTS[match.group()], escaped))
