"""What DataCite is sent for a record (app/doi/payload.py): the attributes of a record with
every field, of hostile records (never invalid), the schema check, and the digest."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from datacite import schema45
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree
from sqlalchemy import select

from app.doi import payload
from app.extensions import db
from app.models import FileRecord, FileVersion

DOI = "10.80001/abcd-1234"
LANDING = "https://repo.example.org/records/"
RECORD_ID = uuid.UUID("6f1c2d4e-0000-4000-8000-000000000001")
#: The official DataCite Metadata Schema 4.5 (kept by tests/pages for the XML export).
DATACITE_XSD = etree.XMLSchema(
    etree.parse(str(Path(__file__).parents[1] / "pages" / "datacite-kernel-4.5" / "metadata.xsd"))
)


def valid(found: dict[str, Any]) -> None:
    """The attributes pass the package's JSON schema, and as XML (what DataCite stores them
    as) the official XSD."""
    payload.validate(found)
    document = etree.fromstring(schema45.tostring(found).encode("utf-8"))
    assert DATACITE_XSD.validate(document), DATACITE_XSD.error_log


def record(**fields: Any) -> FileRecord:
    values: dict[str, Any] = {
        "id": RECORD_ID,
        "original_name": "bericht.pdf",
        "mime_type": "application/pdf",
        "size": 1234,
        "created_at": datetime(2025, 3, 4, 23, 30, tzinfo=UTC),
        "version": 1,
    }
    values.update(fields)
    return FileRecord(**values)


def attributes(found: FileRecord, **keywords: Any) -> dict[str, Any]:
    keywords.setdefault("landing_url", LANDING + str(found.id))
    keywords.setdefault("publisher", "Institut für Beispiele")
    keywords.setdefault("available", None)
    return payload.attributes(found, DOI, **keywords)


def test_a_record_with_every_field_as_datacite_attributes():
    full = record(
        titel="Jahresbericht 2025",
        autoren="Müller, Anna; Institut für Beispiele; Smith, J.",
        sachschlagwoerter="Wasser, Boden; Klima",
        org_themen="Klima; Umwelt",
        beschreibung="Was das Jahr brachte.",
        reprotyp="Bericht",
        sperrfrist=date(2026, 1, 15),
        version=3,
    )
    found = attributes(full, available=date(2026, 1, 15), updated=date(2025, 9, 1))
    valid(found)
    assert found == {
        "doi": DOI,
        "url": LANDING + str(RECORD_ID),
        "creators": [
            {
                "name": "Müller, Anna",
                "nameType": "Personal",
                "familyName": "Müller",
                "givenName": "Anna",
            },
            {"name": "Institut für Beispiele"},
            {"name": "Smith, J.", "nameType": "Personal", "familyName": "Smith", "givenName": "J."},
        ],
        "titles": [{"title": "Jahresbericht 2025"}],
        "publisher": {"name": "Institut für Beispiele"},
        # Public only from the end of the embargo: that is the year of publication.
        "publicationYear": "2026",
        "types": {"resourceTypeGeneral": "Text", "resourceType": "Bericht"},
        "dates": [
            {"date": "2026-01-15", "dateType": "Issued"},
            {"date": "2026-01-15", "dateType": "Available"},
            {"date": "2025-09-01", "dateType": "Updated"},
        ],
        "language": "de",
        "alternateIdentifiers": [
            {"alternateIdentifier": str(RECORD_ID), "alternateIdentifierType": "UUID"}
        ],
        "sizes": ["1234 bytes"],
        "formats": ["application/pdf"],
        "version": "3",
        "schemaVersion": "http://datacite.org/schema/kernel-4",
        # "Klima" is keyword and theme: one subject, where it first stands.
        "subjects": [
            {"subject": "Wasser"},
            {"subject": "Boden"},
            {"subject": "Klima"},
            {"subject": "Umwelt"},
        ],
        "descriptions": [{"description": "Was das Jahr brachte.", "descriptionType": "Abstract"}],
    }


def test_a_bare_record_names_its_file_an_unknown_creator_and_its_creation():
    found = attributes(record())
    valid(found)
    assert found["titles"] == [{"title": "bericht.pdf"}]
    assert found["creators"] == [{"name": ":unav"}]
    assert found["publicationYear"] == "2025"
    assert found["dates"] == [{"date": "2025-03-04", "dateType": "Issued"}]
    assert found["types"] == {"resourceTypeGeneral": "Text"}
    for absent in ("subjects", "descriptions"):
        assert absent not in found


def test_an_embargo_that_ended_before_creation_leaves_the_year_of_creation():
    found = attributes(record(sperrfrist=date(2020, 1, 1)), available=date(2020, 1, 1))
    assert found["publicationYear"] == "2025"
    assert {"date": "2020-01-01", "dateType": "Available"} in found["dates"]


@pytest.mark.parametrize(
    ("mime_type", "general"),
    [
        ("text/csv", "Dataset"),
        ("application/vnd.ms-excel", "Dataset"),
        ("audio/mpeg", "Sound"),
        ("video/mp4", "Audiovisual"),
        ("image/png", "Image"),
        ("application/pdf", "Text"),
        ("application/octet-stream", "Text"),
    ],
)
def test_the_resource_type_follows_the_content_as_the_datacite_export_does(mime_type, general):
    assert attributes(record(mime_type=mime_type))["types"]["resourceTypeGeneral"] == general


HOSTILE = "\x00\x07<b>&amp;</b>\ud800 \ufffe\U0001f4a9 \u202eevil\u202c \x85 e\u0301"


def test_a_hostile_record_is_still_valid_and_encodes():
    hostile = record(
        titel=HOSTILE * 20,
        original_name="\x00",
        autoren=f";;{HOSTILE}; ,;Ä, {HOSTILE}",
        sachschlagwoerter=f"{HOSTILE}, {HOSTILE},,",
        org_themen=HOSTILE,
        beschreibung=HOSTILE * 5000,
        reprotyp="\x01\x02",
        mime_type="",
    )
    found = attributes(hostile, publisher="\x00")
    valid(found)
    text = json.dumps(found, ensure_ascii=False).encode("utf-8").decode("utf-8")
    for dropped in ("\x00", "\x07", "\ud800", "\ufffe", "\x85"):
        assert dropped not in text
    assert found["titles"][0]["title"].startswith("<b>&amp;</b>")
    assert "\U0001f4a9" in found["titles"][0]["title"]
    # The same words as keywords and theme: each once ("&amp;" splits at its ";").
    words = ["<b>&amp", "</b> \U0001f4a9 \u202eevil\u202c  e\u0301"]
    assert found["subjects"] == [{"subject": word} for word in words]
    assert found["publisher"] == {"name": ":unav"}
    assert "formats" not in found and "resourceType" not in found["types"]


def test_a_record_with_only_empty_fields_is_named_by_its_id():
    empty = record(
        titel="", original_name="  ", autoren="", sachschlagwoerter=", ;", beschreibung=""
    )
    found = attributes(empty)
    valid(found)
    assert found["titles"] == [{"title": str(RECORD_ID)}]
    assert found["creators"] == [{"name": ":unav"}]
    assert "subjects" not in found and "descriptions" not in found


optional_text = st.one_of(st.none(), st.text(max_size=300))


@settings(max_examples=150, deadline=None)
@given(
    titel=optional_text,
    original_name=st.text(max_size=255),
    autoren=optional_text,
    sachschlagwoerter=optional_text,
    org_themen=optional_text,
    beschreibung=optional_text,
    reprotyp=optional_text,
    mime_type=st.text(max_size=60),
)
def test_no_record_makes_an_invalid_payload(**fields):
    found = attributes(record(**fields))
    valid(found)
    json.dumps(found, ensure_ascii=False).encode("utf-8")


def test_validate_names_each_problem():
    broken = attributes(record())
    del broken["titles"]
    broken["types"]["resourceTypeGeneral"] = "Paper"
    broken["publicationYear"] = "25"
    with pytest.raises(payload.InvalidPayload) as raised:
        payload.validate(broken)
    messages = raised.value.messages
    assert len(messages) == 3
    assert any(m.startswith("attributes: 'titles' is a required property") for m in messages)
    assert any(m.startswith("types/resourceTypeGeneral: 'Paper'") for m in messages)
    assert any(m.startswith("publicationYear: '25'") for m in messages)


def test_validate_accepts_what_the_rest_api_adds_when_read_back():
    read_back = attributes(record())
    read_back["types"] |= {
        "schemaOrg": "Report",
        "bibtex": "misc",
        "citeproc": "report",
        "ris": "RPRT",
    }
    read_back |= {
        "identifiers": [],
        "state": "findable",
        "prefix": "10.80001",
        "suffix": "abcd-1234",
    }
    payload.validate(read_back)


def test_the_digest_is_sha256_of_canonical_json():
    assert (
        payload.digest({"b": "ä", "a": [1, {"d": None, "c": True}]})
        == hashlib.sha256('{"a":[1,{"c":true,"d":null}],"b":"ä"}'.encode()).hexdigest()
    )


def test_the_digest_changes_with_the_payload_and_only_then():
    first = attributes(record(titel="Eins"))
    again = json.loads(json.dumps(first))  # another dict, keys in another order
    again = dict(reversed(list(again.items())))
    assert payload.digest(again) == payload.digest(first)
    assert payload.digest(attributes(record(titel="Zwei"))) != payload.digest(first)
    # Columns DataCite is not sent (order, who released it) leave the payload as it is.
    moved = record(titel="Eins", reihenfolge=7, freigegeben_von="someone", path="a/b")
    assert payload.digest(attributes(moved)) == payload.digest(first)


def test_updated_is_the_day_the_current_version_began(api, alice):
    """Not given, the `Updated` date is read from the versions: when the replacement that made
    the current version ended the one before."""
    created = api.create(alice, "a.txt", b"one", titel="Messreihe")
    assert api.replace(alice, created["id"], "a.txt", b"two").status_code == 200
    with api.app.app_context():
        row = db.session.get(FileRecord, uuid.UUID(created["id"]))
        assert row is not None and row.version == 2
        replaced = db.session.scalar(
            select(FileVersion.replaced_at).where(FileVersion.record_id == row.id)
        )
        found = attributes(row)
        given = attributes(row, updated=date(2020, 2, 2))
    day = replaced.astimezone(UTC).date().isoformat()
    assert found["dates"][1:] == [{"date": day, "dateType": "Updated"}]
    assert found["version"] == "2"
    assert given["dates"][1:] == [{"date": "2020-02-02", "dateType": "Updated"}]
