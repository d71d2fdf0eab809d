"""The item type Zotero gives a page it saves, by the rules of its Embedded Metadata
translator (zotero/translators: `Embedded Metadata.js` `init`, and `RDF.js` `detectType`, which
it hands the page's prefixed meta tags; as of commit 6c9e20a0, June 2026), replayed in Python
on a page's `<meta>` tags. The translation-server that runs them is not in the package
registries; `docs/pages.md` says how to try it by hand.

What is replayed: a Highwire tag that names a type (`citation_technical_report_institution`:
a report, ...) wins; else the meta tags of the known prefixes (`og:`, `DC.`, ...) are RDF
statements, whose type is the first of the Zotero, bib, PRISM, eprints, OpenGraph, Dublin
Core and schema.org types found, then the default (a journal article where `citation_title`
is, a web page otherwise), then the guesses. Only the statements these pages make (`og:type`,
`DC.type`) are mapped here; a page with any other prefixed statement fails the replay.
"""

from __future__ import annotations

import re
from typing import Any

PREFIXES = {
    "bib", "bibo", "dc", "dcterms", "prism", "foaf", "vcard", "link", "z", "eprint", "eprints",
    "og", "article", "book", "music", "video", "so", "codemeta", "rdf",
}  # fmt: skip
#: Zotero's item types (what `ZU.itemTypeExists` knows), as far as a DC.type could name one.
ITEM_TYPES = {
    "artwork", "audioRecording", "book", "bookSection", "conferencePaper", "dataset",
    "document", "journalArticle", "report", "thesis", "videoRecording", "webpage",
}  # fmt: skip
#: RDF.js: `og:type`, certain (`og`) or a guess (`ogGuess`).
OG = {
    "video.movie": ("og", "videoRecording"),
    "video.episode": ("og", "videoRecording"),
    "video.tv_show": ("og", "videoRecording"),
    "video.other": ("og", "videoRecording"),
    "article": ("ogGuess", "journalArticle"),
    "book": ("og", "book"),
    "music.song": ("og", "audioRecording"),
    "music.album": ("og", "audioRecording"),
    "website": ("og", "webpage"),
}
#: RDF.js: `dc:type` in lower case without spaces (the DCMI and eprints vocabularies).
DC = {
    "book": ("dc", "book"),
    "report": ("dc", "report"),
    "thesis": ("dc", "thesis"),
    "dataset": ("dc", "dataset"),
    "workingpaper": ("dc", "report"),
    "event": ("dcGuess", "presentation"),
    "image": ("dcGuess", "artwork"),
    "movingimage": ("dcGuess", "videoRecording"),
    "software": ("dcGuess", "computerProgram"),
    "sound": ("dcGuess", "audioRecording"),
    "stillimage": ("dcGuess", "artwork"),
    "text": ("dcGuess", "journalArticle"),
}
#: Embedded Metadata.js: Highwire tags that decide the type, or guess it.
HIGHWIRE = {
    "citation_journal_title": "journalArticle",
    "citation_technical_report_institution": "report",
    "citation_conference_title": "conferencePaper",
    "citation_conference": "conferencePaper",
    "citation_book_title": "bookSection",
    "citation_inbook_title": "bookSection",
    "citation_dissertation_institution": "thesis",
}
GUESSES = {"citation_title": "journalArticle", "citation_series_title": "journalArticle"}
#: The other statements RDF.js reads a type from (`bib:type` and `bibo:type` become rdf:type).
TYPING = {
    ("rdf", "type"), ("bib", "type"), ("bibo", "type"), ("so", "type"), ("z", "itemType"),
    ("z", "type"), ("dcterms", "type"), ("eprints", "type"), ("prism", "aggregationtype"),
    ("prism", "genre"), ("prism", "platform"),
}  # fmt: skip


def statements(document: Any) -> tuple[list[tuple[str, str, str]], str | None, str | None]:
    """The page's RDF statements (prefix, property, value), its Highwire type and guess."""
    found, hw_type, hw_guess = [], None, None
    for meta in document.xpath("//meta"):
        tags, value = meta.get("name") or meta.get("property"), meta.get("content")
        if not tags or not value:
            continue
        for tag in tags.split():
            parts = re.split(r"[.:_]", tag)
            prefix, length = None, 0
            if len(parts) > 2:
                prefix, length = parts[1].lower(), len(parts[0]) + len(parts[1]) + 1
            if not prefix or prefix not in PREFIXES:
                prefix, length = parts[0].lower(), len(parts[0])
            if prefix in PREFIXES:
                prop = tag[length + 1 :]
                found.append((prefix, prop[:1].lower() + prop[1:], value))
                continue
            short = tag[tag.rfind("citation_") :] if "citation_" in tag else tag[-1:]
            if short in HIGHWIRE:
                hw_type = HIGHWIRE[short]
            elif short in GUESSES:
                hw_guess = hw_guess or GUESSES[short]
            elif short == "citation_isbn":
                hw_guess = "book"
    return found, hw_type, hw_guess


def item_type(document: Any) -> str | None:
    """The item type Zotero's Embedded Metadata translator gives the page (`document`, an
    lxml tree)."""
    found, hw_type, hw_guess = statements(document)
    if not found:
        return hw_type or hw_guess
    if hw_type:
        return hw_type  # "hwTypes are generally most accurate"
    t: dict[str, str] = {}
    for prefix, prop, value in found:
        if (prefix, prop) == ("og", "type"):
            if value in OG and OG[value][0] not in t:
                t[OG[value][0]] = OG[value][1]
        elif (prefix, prop) == ("dc", "type"):
            if value in ITEM_TYPES:
                t.setdefault("dc", value)
            elif (key := value.lower().replace(" ", "")) in DC:
                t.setdefault(DC[key][0], DC[key][1])
        elif (prefix, prop) in TYPING:
            raise AssertionError(f"a statement the replay does not map: {prefix}:{prop}")
    default = hw_guess or "webpage"
    for key in ("zotero", "bib", "prism", "eprints", "og", "dc", "so"):
        if key in t:
            return t[key]
    return default or t.get("ogGuess") or t.get("dcGuess")
