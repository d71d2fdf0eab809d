"""What DataCite is to hold for a record: the REST API's `data.attributes` (schema 4.5), checked
against the `datacite` package's JSON schema before it is sent, and its digest.

The package's schema describes DataCite's own JSON, which is the REST API's attribute shape
(`doi`, `url`, `event`, `types`, `publisher` as an object, ...); what the REST API adds on top
is derived by DataCite and never sent here: `identifiers` (the older name of
`alternateIdentifiers`) and the `types` of other vocabularies (`schemaOrg`, `bibtex`,
`citeproc`, `ris`). `validate` drops those before checking, so that a payload read back from
DataCite checks too. The values are those of the DataCite XML export (app/pages/exports.py),
written again here: the core-only `doi` layer may not import the pages.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, date
from typing import Any

from datacite import schema45
from sqlalchemy import func, select

from app.extensions import db
from app.files import access
from app.models import FileRecord, FileVersion
from app.schemas.attribution import GND_URL, ORCID_URL, ROR_URL, display_name, people_of

#: Types whose content is data: DataCite's `Dataset`, and schema.org's `Dataset` on the
#: landing page (app/pages/records.py uses this list).
DATASET_TYPES = frozenset(
    {
        "text/csv",
        "application/json",
        "application/ld+json",
        "application/rdf+xml",
        "text/turtle",
        "application/zip",
        "application/vnd.ms-excel",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.oasis.opendocument.spreadsheet",
    }
)
MEDIA_TYPES = {"audio": "Sound", "video": "Audiovisual", "image": "Image"}
#: DataCite's standard value for a creator nobody named.
UNKNOWN = ":unav"
#: What the REST API adds to the schema's shape; DataCite derives it, `validate` ignores it.
REST_ONLY_TYPES = ("schemaOrg", "bibtex", "citeproc", "ris")
REST_ONLY = ("identifiers", "state", "xml", "prefix", "suffix")
#: Characters DataCite's XML cannot carry, and lone surrogates (no UTF-8 for them): dropped.
_NOT_XML = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufdd0-\ufdef"
    + "".join(chr(plane + 0xFFFE) + chr(plane + 0xFFFF) for plane in range(0, 0x110000, 0x10000))
    + "]"
)
_MESSAGE_LENGTH = 300


class InvalidPayload(ValueError):
    """The attributes fail DataCite's 4.5 schema: a mapping error here, never the user's."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("; ".join(messages))
        self.messages = messages


def clean(value: str | None) -> str:
    """`value` without the characters DataCite's XML cannot carry, trimmed."""
    return _NOT_XML.sub("", value or "").strip()


def split_list(value: str | None, separators: str = ";,") -> list[str]:
    """A free-text list field as its items, as the landing page splits it (blanks dropped)."""
    text = clean(value)
    for separator in separators[1:]:
        text = text.replace(separator, separators[0])
    return [item.strip() for item in text.split(separators[0]) if item.strip()]


def creator_attributes(
    name: str,
    *,
    family: str | None = None,
    given: str | None = None,
    organisation: bool = False,
    orcid: str | None = None,
    gnd: str | None = None,
    affiliations: Iterable[tuple[str, str | None]] = (),
) -> dict[str, Any]:
    """A creator in DataCite's form (schema 4.5): a person (`family`, `given`) or an
    organisation (`organisation`; neither: a name of unknown kind, from free-text `autoren`),
    its ORCID iD and GND id (bare) as name identifiers, its affiliations (name, ROR id or
    None) with their ROR ids, each identifier as its address with its scheme."""
    found: dict[str, Any] = {"name": clean(name)}
    if family:
        found["nameType"] = "Personal"
        if given and clean(given):
            found["givenName"] = clean(given)
        found["familyName"] = clean(family)
    elif organisation:
        found["nameType"] = "Organizational"
    identifiers = []
    if orcid:
        identifiers.append(
            {
                "nameIdentifier": ORCID_URL + orcid,
                "nameIdentifierScheme": "ORCID",
                "schemeUri": "https://orcid.org",
            }
        )
    if gnd:
        identifiers.append(
            {"nameIdentifier": GND_URL + gnd, "nameIdentifierScheme": "GND", "schemeUri": GND_URL}
        )
    if identifiers:
        found["nameIdentifiers"] = identifiers
    shown = []
    for affiliation, ror in affiliations:
        if not clean(affiliation):
            continue
        entry: dict[str, Any] = {"name": clean(affiliation)}
        if ror:
            entry["affiliationIdentifier"] = ROR_URL + ror
            entry["affiliationIdentifierScheme"] = "ROR"
            entry["schemeUri"] = "https://ror.org"
        shown.append(entry)
    if shown:
        found["affiliation"] = shown
    return found


def record_creators(record: Any) -> list[dict[str, Any]]:
    """A record's creators in DataCite's form: its structured `creators`, else the names of
    its `autoren`; DataCite's `:unav` without any."""
    structured = record.creators is not None
    found = []
    for person in people_of(record):
        name = clean(display_name(person))
        if not name:
            continue
        found.append(
            creator_attributes(
                name,
                family=person.get("family_name"),
                given=person.get("given_name"),
                organisation=structured and "name" in person,
                orcid=person.get("orcid"),
                gnd=person.get("gnd"),
                affiliations=[(a["name"], a.get("ror")) for a in person.get("affiliations", ())],
            )
        )
    return found or [{"name": UNKNOWN}]


def related_identifier(
    relation: str, kind: str, identifier: str, resource_type: str | None = None
) -> dict[str, Any]:
    """A related identifier in DataCite's form: a DOI or a URL (`kind`), the relation from the
    record's side, and the related resource's general type where it is known."""
    found = {
        "relatedIdentifier": identifier,
        "relatedIdentifierType": kind,
        "relationType": relation,
    }
    if resource_type:
        found["resourceTypeGeneral"] = resource_type
    return found


def series_item(title: str, number: str | None, url: str, resource_type: str) -> dict[str, Any]:
    """A series as DataCite's related item: the collection the record is part of, identified
    by its page, with the record's number there (a text's as its report number)."""
    item: dict[str, Any] = {
        "relationType": "IsPartOf",
        "relatedItemType": "Collection",
        "relatedItemIdentifier": {"relatedItemIdentifier": url, "relatedItemIdentifierType": "URL"},
        "titles": [{"title": clean(title) or UNKNOWN}],
    }
    if number and clean(number):
        item["number"] = clean(number)
        item["numberType"] = "Report" if resource_type == "Text" else "Other"
    return item


def resource_type_general(mime_type: str) -> str:
    if mime_type in DATASET_TYPES:
        return "Dataset"
    return MEDIA_TYPES.get(mime_type.partition("/")[0], "Text")


def version_date(record: FileRecord) -> date | None:
    """The day the record's current version replaced the one before (None for version 1)."""
    if record.version <= 1:
        return None
    replaced = db.session.scalar(
        select(func.max(FileVersion.replaced_at)).where(FileVersion.record_id == record.id)
    )
    return replaced.astimezone(UTC).date() if replaced else None


def attributes(
    record: FileRecord,
    doi: str,
    *,
    landing_url: str,
    publisher: str,
    available: date | None,
    updated: date | None = None,
    related: Sequence[dict[str, Any]] = (),
    series: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The record as DataCite's REST attributes. `available` is DataCite's `Available` date
    (the end of an embargo); `updated` the day the current version began, looked up in the
    versions when not given for a record past version 1. The publication (`publicationYear`,
    `Issued`) is the day the record became public: its creation, or the end of a later
    embargo, as DataCite asks for embargoed resources (`access.publication_date`, what every
    page and export says). `related` are its related identifiers (`related_identifier`),
    `series` its series' related item (`series_item`)."""
    published = access.publication_date(record)
    if updated is None:
        updated = version_date(record)
    title = clean(record.titel) or clean(record.original_name) or str(record.id)
    dates = [{"date": published.isoformat(), "dateType": "Issued"}]
    if available is not None:
        dates.append({"date": available.isoformat(), "dateType": "Available"})
    if updated is not None:
        dates.append({"date": updated.isoformat(), "dateType": "Updated"})
    found: dict[str, Any] = {
        "doi": doi,
        "url": landing_url,
        "creators": record_creators(record),
        "titles": [{"title": title}],
        "publisher": {"name": clean(publisher) or UNKNOWN},
        "publicationYear": f"{published.year:04d}",
        "types": {
            "resourceTypeGeneral": resource_type_general(record.mime_type),
            "resourceType": clean(record.reprotyp),
        },
        "dates": dates,
        "language": "de",
        "alternateIdentifiers": [
            {"alternateIdentifier": str(record.id), "alternateIdentifierType": "UUID"}
        ],
        "sizes": [f"{record.size} bytes"],
        "formats": [clean(record.mime_type)] if clean(record.mime_type) else [],
        "version": str(record.version),
        "schemaVersion": "http://datacite.org/schema/kernel-4",
    }
    if not found["types"]["resourceType"]:
        del found["types"]["resourceType"]
    if not found["formats"]:
        del found["formats"]
    # Subjects are unique items in the schema: a word that is keyword and theme is one subject.
    words = dict.fromkeys(split_list(record.sachschlagwoerter) + split_list(record.org_themen))
    if words:
        found["subjects"] = [{"subject": word} for word in words]
    if description := clean(record.beschreibung):
        found["descriptions"] = [{"description": description, "descriptionType": "Abstract"}]
    if related:
        found["relatedIdentifiers"] = list(related)
    if series is not None:
        found["relatedItems"] = [series]
    return found


def tombstone(
    doi: str, title: str | None, withdrawn: date, *, landing_url: str, publisher: str
) -> dict[str, Any]:
    """What DataCite holds of a record withdrawn before its DOI was ever registered: the
    title the public last saw, and nothing else of the record."""
    return {
        "doi": doi,
        "url": landing_url,
        "creators": [{"name": UNKNOWN}],
        "titles": [{"title": clean(title) or UNKNOWN}],
        "publisher": {"name": clean(publisher) or UNKNOWN},
        "publicationYear": f"{withdrawn.year:04d}",
        "types": {"resourceTypeGeneral": "Other"},
        "schemaVersion": "http://datacite.org/schema/kernel-4",
    }


def schema_shape(attributes: dict[str, Any]) -> dict[str, Any]:
    """The attributes as the package's schema has them: without what the REST API derives."""
    shaped = {key: value for key, value in attributes.items() if key not in REST_ONLY}
    if isinstance(shaped.get("types"), dict):
        shaped["types"] = {
            key: value for key, value in shaped["types"].items() if key not in REST_ONLY_TYPES
        }
    return shaped


def problems(attributes: dict[str, Any]) -> list[str]:
    """Each place where the attributes fail DataCite's 4.5 JSON schema, as "where: what"."""
    messages = []
    for error in schema45.validator.iter_errors(schema_shape(attributes)):
        where = "/".join(str(part) for part in error.absolute_path) or "attributes"
        messages.append(f"{where}: {error.message}"[:_MESSAGE_LENGTH])
    return sorted(messages)


def validate(attributes: dict[str, Any]) -> None:
    """Raise `InvalidPayload` naming every problem when the attributes fail the schema."""
    if messages := problems(attributes):
        raise InvalidPayload(messages)


def digest(attributes: dict[str, Any]) -> str:
    """SHA-256 of the attributes as canonical JSON (sorted keys, no spaces, UTF-8): what
    `Doi.payload_hash` keeps, so that an update is sent only when something changed."""
    text = json.dumps(attributes, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
