"""A record's DOI where readers meet it (issue 40): its page and Cite box, the machine-readable
parts (JSON-LD, Highwire, signposting), every export; and what a DOI-bearing id answers once
its record is gone (a tombstone, 410) or before it is public (404 naming the DOI as reserved).

The DOIs are rows as the DataCite side (app/doi) leaves them, written here with the session.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import extruct
import pytest
import rispy
from lxml import etree, html
from requests.utils import parse_header_links

from app.extensions import db
from app.models import Doi
from tests.pages.test_exports import OAI_DC_XSD, read_bibtex, render_csl
from tests.support.api import Account, Api

BASE = "http://localhost"
#: Any values turn DOIs on; nothing here talks to DataCite (port 9 is discard).
DATACITE = {
    "DATACITE_URL": "http://127.0.0.1:9/",
    "DATACITE_REPOSITORY": "TEST.REPOSITORY",
    "DATACITE_PASSWORD": "not-a-secret",
    "DATACITE_PREFIX": "10.5072",
}
DOI = "10.5072/fr-7k2m-9q4d"
DOI_URL = f"https://doi.org/{DOI}"
#: The official DataCite Metadata Schema 4.5 (datacite/schema, source/meta/kernel-4.5),
#: kept beside this file so that the test runs offline.
DATACITE_XSD = etree.XMLSchema(
    etree.parse(str(Path(__file__).with_name("datacite-kernel-4.5") / "metadata.xsd"))
)
KERNEL = {"d": "http://datacite.org/schema/kernel-4"}
WITHDRAWN_AT = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)
CITATION = "Muster, E. (2026) Arbeitsmarkt 2026. Forschungsdaten. Verfügbar unter: " + DOI_URL


@pytest.fixture
def dois_on(app: Any) -> None:
    app.config.update(DATACITE)


def give_doi(api: Api, record_id: str, doi: str = DOI, **values: Any) -> None:
    """A DOI row for the record, as the DataCite side leaves it (findable by default)."""
    with api.app.app_context():
        row = Doi(doi=doi, record_id=uuid.UUID(record_id), state="findable", wanted="findable")
        for name, value in values.items():
            setattr(row, name, value)
        db.session.add(row)
        db.session.commit()


def page(api: Api, record_id: str, **headers: str) -> Any:
    return api.client.get(f"/records/{record_id}", headers=headers)


def tree(response: Any) -> Any:
    return html.fromstring(response.get_data())


def cite_box(response: Any) -> str:
    return tree(response).xpath("string(//p[@class='citation'])")


@pytest.fixture
def report(api: Api, alice: Account) -> dict[str, Any]:
    return api.create(
        alice,
        "bericht.pdf",
        titel="Arbeitsmarkt 2026",
        autoren="Muster, Erika",
        beschreibung="Ein Bericht.",
    )


def test_the_page_links_and_cites_a_doi_reserved_after_the_record_was_written(
    api: Api, dois_on, report
):
    record_id = report["id"]
    before = page(api, record_id)
    assert "doi.org" not in before.get_data(as_text=True)
    assert cite_box(before).endswith(f"Verfügbar unter: {BASE}/records/{record_id}.")
    give_doi(api, record_id, state=None, wanted="draft")  # reserved, not yet at DataCite
    after = page(api, record_id)
    assert after.status_code == 200
    assert after.headers["ETag"] != before.headers["ETag"]
    document = tree(after)
    details = dict(zip(document.xpath("//dt/text()"), document.xpath("//dd"), strict=True))
    (link,) = details["DOI"].xpath("a")
    assert (link.get("href"), link.text) == (DOI_URL, DOI_URL)
    german = cite_box(after)
    assert german.endswith(f"Verfügbar unter: {DOI_URL}.") and f"/records/{record_id}" not in german
    english = cite_box(page(api, record_id, **{"Accept-Language": "en"}))
    assert english.endswith(f"Available at: {DOI_URL}.")
    # Nobody refreshed the stored citation: the page still uses it (a forged text shows),
    # with the DOI's address in it.
    with api.app.app_context():
        db.session.execute(
            db.text("UPDATE record_citations SET de = replace(de, 'Muster', 'Gespeichert')")
        )
        db.session.commit()
    assert cite_box(page(api, record_id)) == german.replace("Muster", "Gespeichert")


def test_without_the_datacite_settings_no_doi_shows(api: Api, report):
    give_doi(api, report["id"])
    response = page(api, report["id"])
    assert response.status_code == 200
    assert "doi.org" not in response.get_data(as_text=True)
    assert "DOI" not in tree(response).xpath("//dt/text()")
    for name in ("bibtex", "ris", "csl-json", "datacite", "dc"):
        body = api.client.get(f"/records/{report['id']}/export/{name}").get_data(as_text=True)
        assert DOI not in body, name


def test_a_reservation_being_released_shows_nowhere(api: Api, dois_on, report):
    give_doi(api, report["id"], state="draft", wanted="deleted")
    assert DOI not in page(api, report["id"]).get_data(as_text=True)


def test_json_ld_highwire_and_signposting_name_the_doi(api: Api, dois_on, report):
    record_id = report["id"]
    without = page(api, record_id)
    give_doi(api, record_id)
    response = page(api, record_id)
    (item,) = extruct.extract(response.get_data(as_text=True), base_url=BASE, syntaxes=["json-ld"])[
        "json-ld"
    ]
    assert item["@id"] == DOI_URL
    assert item["url"] == f"{BASE}/records/{record_id}"
    assert item["identifier"] == {
        "@type": "PropertyValue",
        "propertyID": "https://registry.identifiers.org/registry/doi",
        "value": f"doi:{DOI}",
        "url": DOI_URL,
    }
    assert tree(response).xpath("//meta[@name='citation_doi']/@content") == [DOI]
    links = parse_header_links(response.headers["Link"])
    assert links[0] == {"url": DOI_URL, "rel": "cite-as"}
    # Everything else signposting says is as without a DOI.
    before = parse_header_links(without.headers["Link"])
    assert before[0] == {"url": f"{BASE}/records/{record_id}", "rel": "cite-as"}
    assert links[1:] == before[1:]
    assert [link["rel"] for link in links].count("cite-as") == 1


def test_every_export_carries_the_doi(api: Api, app, dois_on, report):
    record_id = report["id"]
    give_doi(api, record_id)

    def export(name: str) -> str:
        response = api.client.get(f"/records/{record_id}/export/{name}")
        assert response.status_code == 200, name
        return response.get_data(as_text=True)

    fields = {field.key: field.value for field in read_bibtex(export("bibtex")).fields}
    assert fields["doi"] == DOI and fields["url"] == f"{BASE}/records/{record_id}"
    (entry,) = rispy.loads(export("ris"))
    assert entry["doi"] == DOI and entry["urls"] == [f"{BASE}/records/{record_id}"]
    assert f"DO  - {DOI}" in export("ris").splitlines()
    (item,) = json.loads(export("csl-json"))
    assert item["DOI"] == DOI and item["URL"] == f"{BASE}/records/{record_id}"
    assert render_csl([item]).endswith(f"Available at: {DOI_URL}.")
    dc = etree.fromstring(export("dc").encode())
    OAI_DC_XSD.assertValid(dc)
    identifiers = [element.text for element in dc.iterfind("{*}identifier")]
    assert identifiers == [
        DOI_URL,
        f"{BASE}/records/{record_id}",
        f"{BASE}/api/public/files/{record_id}/download",
    ]


def test_datacite_xml_is_valid_kernel_4_5_with_and_without_a_doi(api: Api, dois_on, report):
    record_id = report["id"]
    page_url = f"{BASE}/records/{record_id}"
    url = f"/records/{record_id}/export/datacite"
    without = etree.fromstring(api.client.get(url).get_data())
    DATACITE_XSD.assertValid(without)
    (identifier,) = without.iterfind("d:identifier", KERNEL)
    assert (identifier.get("identifierType"), identifier.text) == ("URL", page_url)
    give_doi(api, record_id)
    root = etree.fromstring(api.client.get(url).get_data())
    DATACITE_XSD.assertValid(root)
    (identifier,) = root.iterfind("d:identifier", KERNEL)
    assert (identifier.get("identifierType"), identifier.text) == ("DOI", DOI)
    alternates = [
        (element.get("alternateIdentifierType"), element.text)
        for element in root.iterfind("d:alternateIdentifiers/d:alternateIdentifier", KERNEL)
    ]
    assert alternates == [("URL", page_url), ("UUID", record_id)]


def test_a_hostile_record_is_still_valid_datacite_xml(api: Api, alice: Account, dois_on):
    record = api.create(
        alice,
        "daten.csv",
        b"a,b\n1,2\n",
        titel='Ein {Be}richt} <script>alert(1)</script> & "Zitat" \x7f',
        autoren="Bundesamt & Partner; Ölmann, J.-P.",
        sachschlagwoerter="Arbeit, Arbeit",
        org_themen="Arbeit",
        sperrfrist="2999-01-01",
    )
    give_doi(api, record["id"])
    root = etree.fromstring(api.client.get(f"/records/{record['id']}/export/datacite").get_data())
    DATACITE_XSD.assertValid(root)
    assert root.find("d:identifier", KERNEL).get("identifierType") == "DOI"


def withdraw(api: Api, alice: Account, record_id: str, **values: Any) -> None:
    """Delete the record, and leave its DOI withdrawn as the DataCite side does."""
    assert api.delete(record_id, alice).status_code == 204
    give_doi(
        api,
        record_id,
        state="registered",
        wanted="registered",
        withdrawn_at=WITHDRAWN_AT,
        withdrawn_reason="deleted",
        tombstone_title="Arbeitsmarkt 2026",
        tombstone_citation=CITATION,
        **values,
    )


def test_a_deleted_record_with_a_doi_answers_its_tombstone(
    api: Api, alice: Account, dois_on, report
):
    record_id = report["id"]
    withdraw(api, alice, record_id)
    response = page(api, record_id)
    assert response.status_code == 410
    assert response.mimetype == "text/html"
    assert response.headers["X-Robots-Tag"] == "noindex"
    assert parse_header_links(response.headers["Link"]) == [{"url": DOI_URL, "rel": "cite-as"}]
    document = tree(response)
    assert document.xpath("//meta[@name='robots']/@content") == ["noindex"]
    assert document.xpath("string(//h1)") == "Zurückgezogen"
    details = dict(zip(document.xpath("//dt/text()"), document.xpath("//dd"), strict=True))
    assert details["Zitat"].text_content() == CITATION
    assert details["DOI"].xpath("a/@href") == [DOI_URL]
    assert details["Zurückgezogen am"].xpath("time/@datetime") == ["2026-03-14"]
    assert details["Zurückgezogen am"].text_content() == "14. März 2026"
    assert details["Grund"].text_content() == "Die Datei wurde gelöscht."
    english = tree(page(api, record_id, **{"Accept-Language": "en"}))
    assert english.xpath("string(//h1)") == "Withdrawn"
    details = dict(zip(english.xpath("//dt/text()"), english.xpath("//dd"), strict=True))
    assert details["Withdrawn on"].text_content() == "March 14, 2026"
    assert details["Reason"].text_content() == "The file was deleted."
    # Every address of the record says so; JSON readers get the API's error shape.
    assert api.client.get(f"/records/{record_id}/export/bibtex").status_code == 410
    assert api.client.get(f"/records/{record_id}/preview").status_code == 410
    answer = page(api, record_id, Accept="application/json")
    assert answer.status_code == 410 and answer.mimetype == "application/json"
    assert set(answer.get_json()) == {"message"} and DOI in answer.get_json()["message"]
    # The HTML and the JSON answer share an address: a shared cache must keep them apart.
    for either in (response, answer):
        assert {"Accept", "Accept-Language"} <= set(either.vary)
    api_answer = api.client.get(f"/api/public/files/{record_id}")
    assert api_answer.status_code == 410
    assert api_answer.get_json() == {
        "message": f"Gone: this record was withdrawn; its DOI {DOI} stays."
    }
    assert api.client.get(f"/api/public/files/{record_id}/download").status_code == 410


def test_the_tombstone_needs_dois_configured(api: Api, alice: Account, app, report):
    withdraw(api, alice, report["id"])
    response = page(api, report["id"])
    assert response.status_code == 404
    assert tree(response).xpath("string(//h1)") == "Nicht gefunden"
    assert api.client.get(f"/api/public/files/{report['id']}").status_code == 404


def test_a_record_taken_out_of_public_view_answers_its_tombstone_with_its_reason(
    api: Api, alice: Account, dois_on, report
):
    api.set_columns(report["id"], freigabe=False)
    give_doi(
        api,
        report["id"],
        wanted="registered",
        withdrawn_at=WITHDRAWN_AT,
        withdrawn_reason="unreleased",
        tombstone_title="Arbeitsmarkt 2026",
    )
    response = page(api, report["id"])
    assert response.status_code == 410
    details = dict(
        zip(tree(response).xpath("//dt/text()"), tree(response).xpath("//dd"), strict=True)
    )
    assert details["Grund"].text_content() == "Die Datei ist nicht mehr öffentlich freigegeben."
    # No citation was kept: the title stands for it.
    assert details["Zitat"].text_content() == "Arbeitsmarkt 2026"
    # Released again, the record has its page again.
    api.set_columns(report["id"], freigabe=True)
    assert page(api, report["id"]).status_code == 200


def test_a_reserved_doi_of_a_record_not_yet_public_is_named_and_nothing_else(
    api: Api, alice: Account, dois_on
):
    secret = api.create(alice, "s.pdf", freigabe="false", titel="Geheim", autoren="Verborgen")
    give_doi(api, secret["id"], state=None, wanted="draft")
    unknown = page(api, "00000000-0000-4000-8000-000000000000")
    response = page(api, secret["id"])
    assert response.status_code == 404
    assert response.headers["X-Robots-Tag"] == "noindex"
    text = tree(response).xpath("string(//main)")
    assert DOI in text and "reserviert" in text
    body = response.get_data(as_text=True)
    assert "Geheim" not in body and "Verborgen" not in body and "s.pdf" not in body
    assert response.get_data() != unknown.get_data()
    english = tree(page(api, secret["id"], **{"Accept-Language": "en"}))
    assert f"The DOI {DOI} is reserved" in english.xpath("string(//main)")
    answer = page(api, secret["id"], Accept="application/json")
    assert answer.status_code == 404 and DOI in answer.get_json()["message"]
    for either in (response, answer):
        assert {"Accept", "Accept-Language"} <= set(either.vary)
    assert "Geheim" not in answer.get_data(as_text=True)
    # A reservation being released bears no DOI any more: the bare 404.
    with api.app.app_context():
        db.session.execute(db.update(Doi).values(wanted="deleted"))
        db.session.commit()
    assert page(api, secret["id"]).get_data() == unknown.get_data()
