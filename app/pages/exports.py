"""A record's metadata in the citation and metadata formats of other systems.

Each export is built from the same values the page shows (`RecordPage`), with a library where a
maintained writer exists: rispy for RIS, the `datacite` package for DataCite XML (its dict
checked against the JSON schema the package ships before it is written), the OAI-PMH `oai_dc`
writer for Dublin Core, `json` for CSL-JSON. BibTeX is written here: bibtexparser writes values
as given, so the escaping of LaTeX's special characters is ours. Under embargo an export carries
the metadata but no address of the content, like the page.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

import bibtexparser
import rispy
from datacite import schema45
from lxml import etree
from lxml.builder import E

from app.doi import payload
from app.files.access import RecordLike
from app.oai import xml as oai_xml
from app.pages.records import Person, RecordPage, ShownLink, schema_type
from app.schemas.attribution import GND_URL, ROR_URL, series_line


@dataclass(frozen=True, slots=True)
class Export:
    """One format: its path segment, media type, file extension and writer (of the page's
    values, the record as read, and the day that decides its embargo)."""

    name: str
    label: str
    media_type: str
    extension: str
    write: Callable[[RecordPage, RecordLike, date], str | bytes]


def one_line(text: str) -> str:
    """`text` with every run of white space (newlines too) as one space."""
    return " ".join(text.split())


def csl_type(page: RecordPage) -> str:
    kind = schema_type(page.mime_type)
    return {
        "Dataset": "dataset",
        "Report": "report",
        "AudioObject": "song",
        "VideoObject": "motion_picture",
        "ImageObject": "graphic",
    }.get(kind, "report")


def csl_item(page: RecordPage) -> dict[str, Any]:
    """The record as a CSL-JSON item (what citeproc-py renders and reference managers read)."""
    authors = [csl_name(found) for found in page.people]
    published = page.published
    item: dict[str, Any] = {
        "id": page.id,
        "type": csl_type(page),
        "title": page.title,
        "issued": {"date-parts": [[published.year, published.month, published.day]]},
        "publisher": page.repository,
        "URL": page.urls.page,
    }
    if page.doi:
        item["DOI"] = page.doi
    if page.version > 1:
        item["version"] = str(page.version)
    if page.series is not None:
        # A report series is the report's genre and number (how "Cite them right" and
        # reference managers print a report's), and for every type its collection.
        item["collection-title"] = page.series.title
        if page.series.number:
            item["collection-number"] = page.series.number
        if item["type"] == "report":
            item["genre"] = page.series.title
            if page.series.number:
                item["number"] = page.series.number
    if authors:
        item["author"] = authors
    if page.description:
        item["abstract"] = page.description
    if page.keywords or page.themes:
        item["keyword"] = ", ".join(page.keywords + page.themes)
    return item


def csl_name(found: Person) -> dict[str, str]:
    """A creator as CSL names one: a person's family and given names, anything else whole."""
    if found.family:
        return {"family": found.family, **({"given": found.given} if found.given else {})}
    return {"literal": found.name}


def csl_json(page: RecordPage, record: RecordLike, today: date) -> str:
    return json.dumps([csl_item(page)], ensure_ascii=False, indent=2)


#: LaTeX's special characters in a BibTeX value, as the commands that print them.
_LATEX = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "%": r"\%",
    "&": r"\&",
    "#": r"\#",
    "$": r"\$",
    "_": r"\_",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    '"': '{"}',
}
_LATEX_SPECIAL = re.compile("|".join(re.escape(character) for character in _LATEX))


def latex(text: str) -> str:
    """`text` as a braced BibTeX value prints it: special characters escaped, on one line."""
    return _LATEX_SPECIAL.sub(lambda match: _LATEX[match.group()], one_line(text))


def _bibtex_name(found: Person) -> str:
    """A name BibTeX splits as meant: a person "Last, First", anything else (an organisation,
    a name containing "and") kept whole in braces."""
    if found.family and " and " not in f" {found.name.lower()} ":
        return latex(found.family) + (f", {latex(found.given)}" if found.given else "")
    return "{" + latex(found.name) + "}"


def bibtex(page: RecordPage, record: RecordLike, today: date) -> str:
    published = page.published
    fields = [("title", latex(page.title))]
    if page.people:
        fields.append(("author", " and ".join(_bibtex_name(found) for found in page.people)))
    fields += [("year", str(published.year)), ("date", published.isoformat())]
    report = csl_type(page) == "report" and page.kind == "pdf"
    fields.append(("institution" if report else "publisher", latex(page.repository)))
    if page.series is not None:
        fields.append(("series", latex(page.series.title)))
        if page.series.number:
            fields.append(("number", latex(page.series.number)))
    if page.description:
        fields.append(("abstract", latex(page.description)))
    if page.keywords or page.themes:
        fields.append(("keywords", latex(", ".join(page.keywords + page.themes))))
    if page.doi:
        # Verbatim in biblatex (like `url`), and the suffixes minted here are letters, digits
        # and hyphens.
        fields.append(("doi", page.doi))
    fields.append(("url", page.urls.page))  # built here: no character to escape
    entry = bibtexparser.model.Entry(
        "techreport" if report else "misc",
        f"record-{page.id}",
        [bibtexparser.model.Field(key, value) for key, value in fields],
    )
    return bibtexparser.write_string(bibtexparser.Library([entry]))


class RisWriter(rispy.RisWriter):
    """rispy's writer without the number it puts above each reference (`1.`): a RIS file
    begins with `TY  - `, and readers that follow the format reject anything before it."""

    def set_header(self, count: int) -> None:
        return None


RIS_TYPES = {
    "dataset": "DATA",
    "report": "RPRT",
    "song": "SOUND",
    "motion_picture": "VIDEO",
    "graphic": "FIGURE",
}


def ris(page: RecordPage, record: RecordLike, today: date) -> str:
    published = page.published
    entry: dict[str, Any] = {
        "type_of_reference": RIS_TYPES[csl_type(page)],
        "title": one_line(page.title),
        "year": str(published.year),
        "date": published.strftime("%Y/%m/%d"),
        "publisher": one_line(page.repository),
        "urls": [page.urls.page],
        "type_of_work": page.mime_type,
        "language": "de",
    }
    if page.doi:
        entry["doi"] = page.doi
    if page.series is not None:
        # RIS's place of a report's series and number (T2, SN), else the series title (T3)
        # and a number (M1), as Zotero reads them.
        report = entry["type_of_reference"] == "RPRT"
        entry["secondary_title" if report else "tertiary_title"] = one_line(page.series.title)
        if page.series.number:
            entry["issn" if report else "note"] = one_line(page.series.number)
    if page.authors:
        entry["authors"] = [one_line(author) for author in page.authors]
    if page.description:
        entry["abstract"] = one_line(page.description)
    if page.keywords or page.themes:
        entry["keywords"] = [one_line(word) for word in page.keywords + page.themes]
    if page.downloadable:
        entry["file_attachments1"] = page.urls.download
    return rispy.dumps([entry], implementation=RisWriter)


#: DataCite's general resource types of the schema.org types (as `resource_type_general`).
DATACITE_TYPES = {
    "Dataset": "Dataset",
    "AudioObject": "Sound",
    "VideoObject": "Audiovisual",
    "ImageObject": "Image",
}


def resource_type_general(page: RecordPage) -> str:
    kind = schema_type(page.mime_type)
    if kind == "Dataset":
        return "Dataset"
    return {"audio": "Sound", "video": "Audiovisual", "image": "Image"}.get(page.kind, "Text")


def _xml_safe(value: Any) -> Any:
    if isinstance(value, str):
        return oai_xml.xml_text(value)
    if isinstance(value, list):
        return [_xml_safe(item) for item in value]
    if isinstance(value, dict):
        return {key: _xml_safe(item) for key, item in value.items()}
    return value


def datacite_metadata(page: RecordPage) -> dict[str, Any]:
    """The record in DataCite's JSON form (schema 4.5). With a DOI, the DOI is its
    identifier and the page's address an alternate identifier (as Zenodo writes it); without
    one the page's address is the identifier (`datacite_xml`). An unnamed author is
    DataCite's standard value `:unav`."""
    creators = [
        payload.creator_attributes(
            found.name,
            family=found.family,
            given=found.given,
            organisation=found.organisation,
            orcid=found.orcid_id,
            gnd=found.gnd.removeprefix(GND_URL) if found.gnd else None,
            affiliations=[
                (name, ror.removeprefix(ROR_URL) if ror else None)
                for name, ror in found.affiliations
            ],
        )
        for found in page.people
    ] or [{"name": payload.UNKNOWN}]
    dates = [{"date": page.published.isoformat(), "dateType": "Issued"}]
    if page.embargo_until:
        dates.append({"date": page.embargo_until.isoformat(), "dateType": "Available"})
    if page.version_changed is not None:
        dates.append({"date": page.version_changed.isoformat(), "dateType": "Updated"})
    data: dict[str, Any] = {
        "url": page.urls.page,
        "creators": creators,
        "titles": [{"title": page.title}],
        "publisher": {"name": page.repository},
        "publicationYear": str(page.published.year),
        "types": {
            "resourceTypeGeneral": resource_type_general(page),
            "resourceType": schema_type(page.mime_type),
        },
        "dates": dates,
        "language": "de",
        "alternateIdentifiers": [
            {"alternateIdentifier": page.id, "alternateIdentifierType": "UUID"}
        ],
        "sizes": [f"{page.size} bytes"],
        "formats": [page.mime_type],
        "version": str(page.version),
        "schemaVersion": "http://datacite.org/schema/kernel-4",
    }
    if page.doi:
        data["doi"] = page.doi
        data["alternateIdentifiers"].insert(
            0, {"alternateIdentifier": page.urls.page, "alternateIdentifierType": "URL"}
        )
    if page.keywords or page.themes:
        data["subjects"] = [{"subject": word} for word in page.keywords + page.themes]
    if page.description:
        data["descriptions"] = [{"description": page.description, "descriptionType": "Abstract"}]
    if page.links:
        data["relatedIdentifiers"] = [datacite_link(link) for link in page.links]
    if page.series is not None:
        general = data["types"]["resourceTypeGeneral"]
        series = page.series
        data["relatedItems"] = [
            payload.series_item(series.title, series.number, series.url, general)
        ]
    data = _xml_safe(data)
    if "subjects" in data:
        # The schema's subjects are unique items: a word that is both a keyword and a theme (or
        # two that only differ in characters XML cannot carry) is one subject, where it first
        # stands. Validation failing on it answered 500 (issue 36 finding 7).
        words = dict.fromkeys(subject["subject"] for subject in data["subjects"])
        data["subjects"] = [{"subject": word} for word in words]
    return data


def datacite_link(link: ShownLink) -> dict[str, Any]:
    """A link as DataCite's related identifier: a DOI where there is one, else the address."""
    general = None
    if link.schema_type is not None:
        general = DATACITE_TYPES.get(link.schema_type, "Text")
    if link.doi or link.identifier_type == "DOI":
        return payload.related_identifier(
            link.relation_type, "DOI", link.doi or link.identifier, general
        )
    return payload.related_identifier(link.relation_type, "URL", link.href, general)


def datacite_xml(page: RecordPage, record: RecordLike, today: date) -> bytes:
    data = datacite_metadata(page)
    schema45.validator.validate(data)  # raises on a mapping error: a bug here, never input
    root = schema45.dump_etree(data)
    if not page.doi:
        # The schema requires an identifier; the package writes one only from a DOI.
        identifier = E.identifier(oai_xml.xml_text(page.urls.page), identifierType="URL")
        identifier.tag = f"{{{root.nsmap[None]}}}identifier"
        root.insert(0, identifier)
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True)


def dc_relations(page: RecordPage) -> list[str]:
    """Dublin Core's `dc:relation`s of a page: its series, then the address of each link."""
    found = [series_line(page.series.title, page.series.number)] if page.series else []
    return found + [link.url for link in page.links]


def dublin_core(page: RecordPage, record: RecordLike, today: date) -> bytes:
    urls = {
        "doi": page.doi_url or "",
        "record": page.urls.page,
        "download": page.urls.download if page.downloadable else "",
    }
    element = oai_xml.dublin_core(
        record, urls, today, publisher=page.repository, relations=dc_relations(page)
    )
    return etree.tostring(element, xml_declaration=True, encoding="UTF-8", pretty_print=True)


EXPORTS = {
    export.name: export
    for export in (
        Export("bibtex", "BibTeX", "application/x-bibtex", "bib", bibtex),
        Export("ris", "RIS", "application/x-research-info-systems", "ris", ris),
        Export("csl-json", "CSL-JSON", "application/vnd.citationstyles.csl+json", "json", csl_json),
        Export(
            "datacite", "DataCite XML", "application/vnd.datacite.datacite+xml", "xml", datacite_xml
        ),
        Export("dc", "Dublin Core XML", "application/x-dc+xml", "xml", dublin_core),
    )
}
#: What `/records/{id}` answers by content negotiation: the page first, so `*/*` gets it.
HTML = "text/html"
OFFERS = [HTML, *(export.media_type for export in EXPORTS.values())]
BY_MEDIA_TYPE = {export.media_type: export for export in EXPORTS.values()}
