"""Series (issue 49, point 3): made by an administrator, joined by a record's `series`; a page
newest first and paged, an Atom feed, an OAI-PMH set; the place in the series in the citation
and every export (docs/links-and-series.md)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import bibtexparser
import feedparser
import pytest
import rispy
from lxml import etree, html

from app.extensions import db
from app.models import FileRecord, RecordCitation
from app.pages import series as series_page
from app.pages.stored import key_of
from tests.oai.test_oai import NS, error_code, ident, oai
from tests.support.api import Account, Api

DATACITE_XSD = etree.XMLSchema(
    etree.parse(str(Path(__file__).parents[1] / "pages" / "datacite-kernel-4.5" / "metadata.xsd"))
)
OAI_DC_XSD = etree.XMLSchema(etree.parse(str(Path(__file__).parents[1] / "pages" / "oai_dc.xsd")))
CSV = b"jahr;quote\n2025;5,9\n"
REPORTS = {"slug": "forschungsbericht", "title": "IAB-Forschungsbericht"}


def make_series(api: Api, account: Account, **body: Any) -> Any:
    return api.client.post("/api/series", json=body, headers=account.auth)


@pytest.fixture
def reports(api: Api, admin: Account) -> dict[str, Any]:
    made = make_series(api, admin, **REPORTS, description="Ergebnisse der Forschung.")
    assert made.status_code == 201, made.get_json()
    return made.get_json()


def in_series(api: Api, account: Account, number: str | None, **fields: Any) -> dict[str, Any]:
    place = {"slug": "forschungsbericht", "number": number}
    return api.create(account, series=json.dumps(place), **fields)


def test_an_administrator_makes_a_series_and_everyone_signed_in_lists_it(
    api: Api, admin: Account, alice: Account
):
    made = make_series(api, admin, slug="daten-reihe", title=" Datenreport ")
    assert made.status_code == 201
    body = made.get_json()
    assert (body["slug"], body["title"], body["description"]) == (
        "daten-reihe",
        "Datenreport",
        None,
    )
    assert body["page"] == "http://localhost/series/daten-reihe"
    assert body["feed"] == "http://localhost/api/public/feed.atom?series=daten-reihe"
    assert body["oai_set"] == "series~daten-reihe"
    listed = api.get("/api/series", alice).get_json()["data"]
    assert [found["slug"] for found in listed] == ["daten-reihe"]
    assert api.client.get("/api/series").status_code == 401
    trail = api.get("/api/audit", admin, query_string={"action": "series.create"}).get_json()
    assert trail["data"][0]["changes"] == {"slug": "daten-reihe", "title": "Datenreport"}


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ({"slug": "Forschung", "title": "X"}, "slug"),
        ({"slug": "a--b", "title": "X"}, "slug"),
        ({"slug": "a" * 65, "title": "X"}, "slug"),
        ({"slug": "ok"}, "title"),
        ({"slug": "ok", "title": "  "}, "title"),
        ({"title": "X"}, "slug"),
        ({"slug": "ok", "title": "X", "owner": 1}, "owner"),
    ],
)
def test_a_bad_series_is_422_naming_the_field(api: Api, admin: Account, body: dict, key: str):
    response = make_series(api, admin, **body)
    assert response.status_code == 422
    assert key in response.get_json()["errors"]
    assert api.get("/api/series", admin).get_json()["data"] == []


def test_only_administrators_make_series_and_a_slug_is_taken_once(
    api: Api, admin: Account, alice: Account, reports
):
    assert make_series(api, alice, slug="meine", title="Meine").status_code == 403
    again = make_series(api, admin, slug="forschungsbericht", title="Anders")
    assert again.status_code == 409
    assert api.get("/api/series", admin).get_json()["data"][0]["title"] == REPORTS["title"]


def test_a_record_names_its_series_and_number(api: Api, alice: Account, reports):
    record = in_series(api, alice, "7/2026", titel="Bericht")
    assert record["series"] == {"slug": "forschungsbericht", "number": "7/2026"}
    patched = api.patch(record["id"], alice, {"series": {"slug": "forschungsbericht", "number": 8}})
    assert patched.get_json()["series"] == {"slug": "forschungsbericht", "number": "8"}
    public = api.get(f"/api/public/files/{record['id']}").get_json()
    assert public["series"] == {"slug": "forschungsbericht", "number": "8"}
    assert api.patch(record["id"], alice, {"series": None}).get_json()["series"] is None


@pytest.mark.parametrize(
    ("sent", "key", "reason"),
    [
        ({"slug": "unbekannt"}, "series.slug", "no series unbekannt"),
        ({"slug": "Not A Slug"}, "series.slug", "lowercase"),
        ({"number": "7"}, "series.slug", "required"),
        ({"slug": "forschungsbericht", "number": "x" * 65}, "series.number", "64"),
        ("forschungsbericht", "series", "JSON"),
    ],
)
def test_a_bad_series_place_is_422_and_stores_nothing(
    api: Api, alice: Account, reports, sent: Any, key: str, reason: str
):
    response = api.upload(alice, series=json.dumps(sent))
    assert response.status_code == 422
    errors = response.get_json()["errors"]
    assert list(errors) == [key], errors
    assert reason in errors[key][0]
    assert api.rows() == []


def series_items(api: Api, path: str = "/series/forschungsbericht") -> tuple[list[str], Any]:
    response = api.client.get(path)
    assert response.status_code == 200
    document = html.fromstring(response.get_data())
    return [a.text_content() for a in document.xpath("//ol[@class='records']/li/a")], document


def test_the_series_page_lists_its_public_records_newest_first_in_pages(
    api: Api, alice: Account, reports, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(series_page, "PAGE_SIZE", 2)
    for number in ("1/2026", "2/2026", "3/2026"):
        in_series(api, alice, number, titel=f"Bericht {number}")
    in_series(api, alice, "4/2026", titel="Noch nicht", freigabe="false")
    api.create(alice, titel="Keine Reihe")
    titles, document = series_items(api)
    assert titles == ["3/2026: Bericht 3/2026", "2/2026: Bericht 2/2026"]
    assert document.xpath("//h1")[0].text_content() == "IAB-Forschungsbericht"
    assert "Ergebnisse der Forschung." in document.text_content()
    [feed] = document.xpath("//link[@rel='alternate']/@href")
    assert feed == "http://localhost/api/public/feed.atom?series=forschungsbericht"
    older = document.xpath("//a[@rel='next']/@href")[0]
    assert series_items(api, older.removeprefix("http://localhost"))[0] == [
        "1/2026: Bericht 1/2026"
    ]
    missing = api.client.get("/series/unbekannt")
    assert missing.status_code == 404 and missing.mimetype == "text/html"
    assert api.client.get("/series/Nicht_So").status_code == 404


def test_the_record_page_names_its_place_in_the_series(api: Api, alice: Account, reports):
    record = in_series(api, alice, "7/2026", titel="Bericht")
    document = html.fromstring(api.client.get(f"/records/{record['id']}").get_data())
    [line] = document.xpath("//p[@class='series']")
    assert " ".join(line.text_content().split()) == (
        "Teil der Reihe IAB-Forschungsbericht, Nr. 7/2026"
    )
    assert line.find("a").get("href") == "http://localhost/series/forschungsbericht"
    citation = document.xpath("//p[@class='citation']")[0].text_content()
    assert ". IAB-Forschungsbericht 7/2026. File repository. " in citation
    # The Cite box kept with the record (app/pages/stored.py) holds the series too.
    with api.app.app_context():
        stored = db.session.get(RecordCitation, uuid.UUID(record["id"]))
        assert "IAB-Forschungsbericht 7/2026" in stored.de
        row = db.session.get(FileRecord, uuid.UUID(record["id"]))
        assert stored.key == key_of(row, "File repository", "IAB-Forschungsbericht")
        db.session.remove()


def test_the_atom_feed_of_a_series(api: Api, alice: Account, reports):
    mine = in_series(api, alice, "1", titel="In der Reihe")
    api.create(alice, titel="Außerhalb")
    response = api.client.get("/api/public/feed.atom?series=forschungsbericht")
    assert response.status_code == 200
    feed = feedparser.parse(response.data)
    assert [entry.title for entry in feed.entries] == ["In der Reihe"]
    assert feed.feed.title.endswith("IAB-Forschungsbericht")
    alternate = [link.href for link in feed.feed.links if link.rel == "alternate"]
    assert alternate == ["http://localhost/series/forschungsbericht"]
    assert mine["id"] in feed.entries[0].link
    unknown = api.client.get("/api/public/feed.atom?series=unbekannt")
    assert unknown.status_code == 422
    assert list(unknown.get_json()["errors"]) == ["series"]


def test_the_series_is_an_oai_pmh_set(api: Api, alice: Account, reports):
    member = in_series(api, alice, "7/2026", titel="Bericht", path="berichte")
    api.create(alice, titel="Sonst", path="berichte")
    listed = oai(api, verb="ListSets")
    sets = {
        s.findtext("oai:setSpec", namespaces=NS): s.findtext("oai:setName", namespaces=NS)
        for s in listed.iterfind(".//oai:set", NS)
    }
    assert sets == {"series~forschungsbericht": "IAB-Forschungsbericht", "berichte": "berichte"}
    found = oai(api, verb="ListRecords", metadataPrefix="oai_dc", set="series~forschungsbericht")
    [record] = found.findall(".//oai:record", NS)
    header = record.find("oai:header", NS)
    assert header.findtext("oai:identifier", namespaces=NS) == ident(member["id"])
    specs = [e.text for e in header.iterfind("oai:setSpec", NS)]
    assert specs == ["berichte", "series~forschungsbericht"]
    dc = record.find(".//oai_dc:dc", NS)
    assert OAI_DC_XSD.validate(dc), OAI_DC_XSD.error_log
    assert [e.text for e in dc.iterfind("dc:relation", NS)] == ["IAB-Forschungsbericht; 7/2026"]
    # Deleted, it stays in its series' set as a deletion.
    assert api.delete(member["id"], alice).status_code == 204
    gone = oai(api, verb="ListIdentifiers", metadataPrefix="oai_dc", set="series~forschungsbericht")
    [deleted] = gone.findall(".//oai:header", NS)
    assert deleted.get("status") == "deleted"
    assert [e.text for e in deleted.iterfind("oai:setSpec", NS)] == [
        "berichte",
        "series~forschungsbericht",
    ]
    none = oai(api, verb="ListIdentifiers", metadataPrefix="oai_dc", set="series~unbekannt")
    assert error_code(none) == "noRecordsMatch"


def export(api: Api, record_id: str, name: str) -> str:
    response = api.client.get(f"/records/{record_id}/export/{name}")
    assert response.status_code == 200
    return response.get_data(as_text=True)


def test_every_export_carries_the_place_in_the_series(api: Api, alice: Account, reports):
    report = in_series(api, alice, "7/2026", titel="Bericht")
    data = in_series(api, alice, "7a", name="quote.csv", data=CSV, titel="Daten")

    [entry] = bibtexparser.parse_string(export(api, report["id"], "bibtex")).entries
    assert (entry["series"], entry["number"]) == ("IAB-Forschungsbericht", "7/2026")
    [ris] = rispy.loads(export(api, report["id"], "ris"))
    assert (ris["type_of_reference"], ris["secondary_title"], ris["issn"]) == (
        "RPRT",
        "IAB-Forschungsbericht",
        "7/2026",
    )
    [ris] = rispy.loads(export(api, data["id"], "ris"))
    assert (ris["tertiary_title"], ris["note"]) == ("IAB-Forschungsbericht", "7a")
    [csl] = json.loads(export(api, report["id"], "csl-json"))
    assert (csl["collection-title"], csl["collection-number"]) == (
        "IAB-Forschungsbericht",
        "7/2026",
    )
    assert (csl["genre"], csl["number"]) == ("IAB-Forschungsbericht", "7/2026")
    [csl] = json.loads(export(api, data["id"], "csl-json"))
    assert "genre" not in csl and csl["collection-number"] == "7a"

    for record, number_type in ((report, "Report"), (data, "Other")):
        document = etree.fromstring(export(api, record["id"], "datacite").encode())
        assert DATACITE_XSD.validate(document), DATACITE_XSD.error_log
        d = {"d": "http://datacite.org/schema/kernel-4"}
        [item] = document.findall("d:relatedItems/d:relatedItem", d)
        assert (item.get("relationType"), item.get("relatedItemType")) == ("IsPartOf", "Collection")
        assert item.findtext("d:titles/d:title", namespaces=d) == "IAB-Forschungsbericht"
        assert item.find("d:number", d).get("numberType") == number_type
        identifier = item.find("d:relatedItemIdentifier", d)
        assert identifier.text == "http://localhost/series/forschungsbericht"

    dc = etree.fromstring(export(api, report["id"], "dc").encode())
    assert OAI_DC_XSD.validate(dc), OAI_DC_XSD.error_log
    assert [e.text for e in dc.iterfind("dc:relation", NS)] == ["IAB-Forschungsbericht; 7/2026"]
