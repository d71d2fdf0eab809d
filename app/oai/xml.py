"""The XML of OAI-PMH 2.0 answers and of the `oai_dc` record metadata (lxml)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any

from lxml import etree

from app.files.access import embargo_active, publication_date
from app.schemas.attribution import display_name, people_of

OAI = "http://www.openarchives.org/OAI/2.0/"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
OAI_DC = "http://www.openarchives.org/OAI/2.0/oai_dc/"
DC = "http://purl.org/dc/elements/1.1/"
OAI_SCHEMA = "http://www.openarchives.org/OAI/2.0/OAI-PMH.xsd"
OAI_DC_SCHEMA = "http://www.openarchives.org/OAI/2.0/oai_dc.xsd"
IDENTIFIER_SCHEMA = "http://www.openarchives.org/OAI/2.0/oai-identifier.xsd"

METADATA_FORMATS = {
    "oai_dc": (OAI_DC_SCHEMA, OAI_DC),
    # DataCite's OAI schema 1.1 (app/oai/datacite.py), which OpenAIRE and BASE read.
    "oai_datacite": (
        "http://schema.datacite.org/oai/oai-1.1/oai.xsd",
        "http://schema.datacite.org/oai/oai-1.1/",
    ),
}


def datestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# Characters XML 1.0 cannot carry; the database may hold them (only NUL is refused on input).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(value: str) -> str:
    """`value` without the characters XML cannot carry (they are dropped)."""
    return _NOT_XML.sub("", value)


def title_of(record: Any) -> str:
    """A title every XML output can show: the first of `titel` and `original_name` that keeps
    text once cleaned (rows stored before input was checked may hold neither), else the id."""
    for candidate in (record.titel, record.original_name):
        cleaned = xml_text(candidate or "").strip()
        if cleaned:
            return cleaned
    return str(record.id)


def sub(parent: Any, tag: str, text: str | None = None, **attributes: str) -> Any:
    safe = {name: xml_text(value) for name, value in attributes.items()}
    element = etree.SubElement(parent, tag, safe)
    if text is not None:
        element.text = xml_text(text)
    return element


def envelope(base_url: str, arguments: dict[str, str] | None) -> Any:
    """The OAI-PMH root with responseDate and request; `arguments` None for badVerb and
    badArgument answers, whose request element carries no attributes."""
    root = etree.Element(f"{{{OAI}}}OAI-PMH", nsmap={None: OAI, "xsi": XSI})
    root.set(f"{{{XSI}}}schemaLocation", f"{OAI} {OAI_SCHEMA}")
    sub(root, f"{{{OAI}}}responseDate", datestamp(datetime.now(UTC)))
    sub(root, f"{{{OAI}}}request", base_url, **(arguments or {}))
    return root


def error(root: Any, code: str, message: str) -> None:
    """Replace whatever the answer held after its request element with an error; badVerb
    and badArgument answers do not echo the arguments."""
    for child in list(root)[2:]:
        root.remove(child)
    if code in ("badVerb", "badArgument"):
        root[1].attrib.clear()
    sub(root, f"{{{OAI}}}error", message, code=code)


def verb_element(root: Any, verb: str) -> Any:
    return sub(root, f"{{{OAI}}}{verb}")


def serialize(root: Any) -> bytes:
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


def header(
    parent: Any, identifier: str, stamp: datetime, set_specs: list[str], deleted: bool
) -> None:
    element = sub(parent, f"{{{OAI}}}header", **({"status": "deleted"} if deleted else {}))
    sub(element, f"{{{OAI}}}identifier", identifier)
    sub(element, f"{{{OAI}}}datestamp", datestamp(stamp))
    for spec in set_specs:
        sub(element, f"{{{OAI}}}setSpec", spec)


def _dcmi_type(mime_type: str) -> str:
    major = mime_type.partition("/")[0]
    return {"audio": "Sound", "video": "MovingImage", "image": "StillImage"}.get(
        major, "Dataset" if mime_type in ("text/csv",) or "spreadsheet" in mime_type else "Text"
    )


def _split(value: str | None) -> list[str]:
    if not value:
        return []
    return [part.strip() for part in value.replace(";", ",").split(",") if part.strip()]


def oai_dc(
    parent: Any, record: Any, urls: dict[str, str], today: date, relations: Sequence[str] = ()
) -> None:
    """A record as Dublin Core in an OAI-PMH answer (docs/harvesting.md has the mapping)."""
    metadata = sub(parent, f"{{{OAI}}}metadata")
    metadata.append(dublin_core(record, urls, today, relations=relations))


def dublin_core(
    record: Any,
    urls: dict[str, str],
    today: date,
    publisher: str | None = None,
    relations: Sequence[str] = (),
) -> Any:
    """The `oai_dc:dc` element of a record (also the landing pages' Dublin Core export, which
    names the `publisher`); an empty or missing URL in `urls` is left out (`doi`: the DOI's
    resolver address, first of the identifiers); `relations` are its `dc:relation`s (its
    series, "IAB-Forschungsbericht; 7/2026", and the addresses of what it links to)."""
    dc = etree.Element(f"{{{OAI_DC}}}dc", nsmap={"oai_dc": OAI_DC, "dc": DC, "xsi": XSI})
    dc.set(f"{{{XSI}}}schemaLocation", f"{OAI_DC} {OAI_DC_SCHEMA}")

    def put(name: str, value: str | None) -> None:
        if value:
            sub(dc, f"{{{DC}}}{name}", value)

    put("title", title_of(record))
    for creator in people_of(record):
        put("creator", display_name(creator).strip())
    for subject in _split(record.sachschlagwoerter) + _split(record.org_themen):
        put("subject", subject)
    put("description", record.beschreibung)
    put("publisher", publisher)
    put("date", publication_date(record).isoformat())
    put("type", _dcmi_type(record.mime_type))
    put("type", record.reprotyp)
    put("format", record.mime_type)
    put("identifier", urls.get("doi"))
    put("identifier", urls["record"])
    put("identifier", urls["download"])
    put("identifier", record.aktiv_id)
    for relation in relations:
        put("relation", relation)
    if embargo_active(record, today):
        put("rights", f"Embargoed until {record.sperrfrist.isoformat()}.")
    return dc
