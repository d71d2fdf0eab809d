"""Text rules: JSON, RDF/XML, CSV and plain text, and the markup that is never stored as text.

A browser that sniffs a stored text file must never find a page or a script in it, so plain text
and CSV carry no HTML/SVG/XML/script markers; XML is accepted only as RDF/XML.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
from dataclasses import dataclass

from .mime import CSV, JSON, RDF, TEXT, UnsupportedFileType
from .sample import Sample
from .xmlscan import scan_root

RDF_NAMESPACE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"

# The name's extension may pick one of these, if the content supports it.
EXTENSION_TYPES = {"txt": TEXT, "text": TEXT, "csv": CSV, "json": JSON, "rdf": RDF}

_UTF8_BOM = b"\xef\xbb\xbf"
_CONTROL_CHARACTERS = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_MARKUP_START = re.compile(r"<[a-z!?/]", re.IGNORECASE)
_EMBEDDED_MARKUP = re.compile(
    rb"<\s*(?:[a-z][\w.-]*:)?(script|html|svg|iframe|body|frameset|object|embed)(?=[\s/>])",
    re.IGNORECASE,
)
_ACTIVE_NAMESPACES = re.compile(
    rb"http://www\.w3\.org/(?:1999/xhtml|2000/svg)|<\?xml-stylesheet", re.IGNORECASE
)
_HTML_DOCTYPE = re.compile(rb"<!doctype\s+html", re.IGNORECASE)
_MARKUP_NAMES = {
    "script": "Scripts are not allowed.",
    "html": "HTML documents are not allowed.",
    "svg": "SVG images are not allowed.",
}
_CSV_DELIMITERS = (",", ";")
_CSV_MIN_COLUMNS = 2
_CSV_MIN_ROWS = 2


@dataclass(frozen=True, slots=True)
class DecodedText:
    """The sample as text. ``tail`` is empty when ``head`` already holds the whole content."""

    head: str
    tail: str
    encoding: str
    complete: bool


def decode_text(sample: Sample) -> DecodedText | None:
    """UTF-8 (optional BOM) or cp1252/Latin-1 text without control characters, else None.

    A multi-byte character cut at the end of the head or the start of the tail is tolerated.
    """
    complete = sample.size <= len(sample.head)
    raw_head = sample.head.removeprefix(_UTF8_BOM)
    raw_tail = b"" if complete else sample.tail
    if _CONTROL_CHARACTERS.search(raw_head) or _CONTROL_CHARACTERS.search(raw_tail):
        return None
    try:
        head = codecs.getincrementaldecoder("utf-8")().decode(raw_head, final=complete)
        tail = _skip_continuation_bytes(raw_tail).decode("utf-8")
        return DecodedText(head, tail, "utf-8", complete)
    except UnicodeDecodeError:
        pass
    try:
        return DecodedText(raw_head.decode("cp1252"), raw_tail.decode("cp1252"), "cp1252", complete)
    except UnicodeDecodeError:
        return None


def _skip_continuation_bytes(data: bytes) -> bytes:
    start = 0
    while start < min(3, len(data)) and 0x80 <= data[start] <= 0xBF:
        start += 1
    return data[start:]


def classify_text(sample: Sample, extension: str | None) -> str | None:
    """The text type for the content, None if it is not text; raises for refused text.

    Candidates are ordered from most to least specific; the extension may pick among them.
    """
    text = decode_text(sample)
    if text is None:
        return None
    start = text.head.lstrip()
    lowered = start[:16].lower()
    if text.head.startswith("#!"):
        raise UnsupportedFileType("Scripts are not allowed.")
    if lowered.startswith("<?php"):
        raise UnsupportedFileType("PHP scripts are not allowed.")
    if _MARKUP_START.match(start):
        return _classify_markup(sample)
    candidates: list[str] = []
    if _is_json(text):
        candidates.append(JSON)
    embedded = _find_embedded_markup(sample)
    if embedded is None:
        if _is_csv(text):
            candidates.append(CSV)
        candidates.append(TEXT)
    if not candidates:
        raise UnsupportedFileType(
            f"Text containing HTML or script markup (<{embedded}>) is not allowed."
        )
    preferred = EXTENSION_TYPES.get(extension or "")
    return preferred if preferred in candidates else candidates[0]


def _find_embedded_markup(sample: Sample) -> str | None:
    """The first dangerous tag name in the head or tail, if any."""
    for part in (sample.head, sample.tail):
        match = _EMBEDDED_MARKUP.search(part)
        if match:
            return match.group(1).decode("ascii").lower()
    return None


def _classify_markup(sample: Sample) -> str:
    """Content starting with a tag is accepted only as RDF/XML without active content."""
    root = scan_root(sample.head, complete=sample.size <= len(sample.head))
    if root.namespace == RDF_NAMESPACE and root.local_name == "RDF":
        if "xml-stylesheet" in root.processing_instructions or _has_active_content(sample):
            raise UnsupportedFileType(
                "RDF/XML documents embedding HTML, SVG, scripts or stylesheets are not allowed."
            )
        return RDF
    if root.local_name is None:
        raise UnsupportedFileType(_describe_malformed_markup(sample))
    local = root.local_name.lower()
    if local in _MARKUP_NAMES:
        raise UnsupportedFileType(_MARKUP_NAMES[local])
    if root.namespace == "http://www.w3.org/1999/xhtml":
        raise UnsupportedFileType("HTML documents are not allowed.")
    raise UnsupportedFileType("HTML and XML documents other than RDF/XML are not allowed.")


def _describe_malformed_markup(sample: Sample) -> str:
    """Name what markup that is not well-formed XML most likely is, for the client."""
    if _HTML_DOCTYPE.search(sample.head[:1024]):
        return "HTML documents are not allowed."
    tag = _find_embedded_markup(sample)
    if tag in ("script", "svg"):
        return _MARKUP_NAMES[tag]
    if tag is not None:
        return "HTML documents are not allowed."
    return "HTML and XML documents other than RDF/XML are not allowed."


def _has_active_content(sample: Sample) -> bool:
    for part in (sample.head, sample.tail):
        if _EMBEDDED_MARKUP.search(part):
            return True
        # A namespace is an attribute value: `&#x78;` spells the `x` of xhtml just as well.
        if _ACTIVE_NAMESPACES.search(_CHARACTER_REFERENCE.sub(_referenced_character, part)):
            return True
    return False


_CHARACTER_REFERENCE = re.compile(rb"&#(?:x([0-9a-fA-F]{1,6})|([0-9]{1,7}));")


def _referenced_character(match: re.Match[bytes]) -> bytes:
    code = int(match[1], 16) if match[1] else int(match[2])
    try:
        return chr(code).encode("utf-8", "replace")
    except (ValueError, OverflowError):
        return b""


def _is_json(text: DecodedText) -> bool:
    """A UTF-8 JSON object or array: parsed whole when it fits the head, else judged by its ends."""
    if text.encoding != "utf-8":
        return False
    start = text.head.lstrip()[:1]
    if start not in ("{", "["):
        return False
    if not text.complete:
        closing = "}" if start == "{" else "]"
        return text.tail.rstrip().endswith(closing)
    try:
        value = json.loads(text.head, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return False
    return isinstance(value, dict | list)


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _is_csv(text: DecodedText) -> bool:
    """At least two rows with the same number (>= 2) of comma- or semicolon-separated fields.

    For content longer than the head only the head's complete records are judged: it is cut at
    its last line break, and the last record is dropped too, as a quoted field may span that.
    """
    data = text.head if text.complete else text.head[: text.head.rfind("\n") + 1]
    for delimiter in _CSV_DELIMITERS:
        if delimiter not in data:
            continue
        reader = csv.reader(io.StringIO(data, newline=""), delimiter=delimiter, strict=True)
        try:
            rows = [len(row) for row in reader if row]
        except csv.Error:
            continue
        if not text.complete:
            rows = rows[:-1]
        if len(rows) >= _CSV_MIN_ROWS and rows[0] >= _CSV_MIN_COLUMNS and len(set(rows)) == 1:
            return True
    return False
