"""Where machines meet who made a record and what it belongs to (issue 49, point 5): Highwire,
JSON-LD, every export and oai_dc carry the structured creators with their identifiers and
affiliations, the links (the inverse ones too) and the series; Zotero types a report as a
report of its institution and a data set as a data set; and the publication date under
embargo is the same everywhere (docs/pages.md, docs/links-and-series.md)."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import bibtexparser
import extruct
import pytest
import rispy
from lxml import etree, html

from tests.files.test_creators import ERIKA, INSTITUTE, ORCID, ROR
from tests.files.test_editions import edition
from tests.files.test_related_identifiers import CSV, dataset, link
from tests.oai.test_oai import NS, ident, oai
from tests.support import samples, zotero
from tests.support.api import Account, Api

BASE = "http://localhost"
DATACITE_XSD = etree.XMLSchema(
    etree.parse(str(Path(__file__).with_name("datacite-kernel-4.5") / "metadata.xsd"))
)
D = {"d": "http://datacite.org/schema/kernel-4"}
PERSON = {"family_name": "Beispiel", "given_name": "Max"}


def document(api: Api, record_id: str) -> Any:
    response = api.client.get(f"/records/{record_id}")
    assert response.status_code == 200
    return html.fromstring(response.get_data())


def export(api: Api, record_id: str, name: str) -> str:
    response = api.client.get(f"/records/{record_id}/export/{name}")
    assert response.status_code == 200
    return response.get_data(as_text=True)


def json_ld(api: Api, record_id: str) -> dict[str, Any]:
    page = api.client.get(f"/records/{record_id}").get_data(as_text=True)
    [item] = extruct.extract(page, base_url=BASE, syntaxes=["json-ld"])["json-ld"]
    return item


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("bericht.pdf", samples.pdf_bytes(), "report"),
        ("notiz.docx", samples.docx_bytes(), "report"),
        ("quote.csv", CSV, "dataset"),
        ("tabelle.xlsx", samples.xlsx_bytes(), "dataset"),
        ("folge.mp3", samples.mp3_bytes(), "audioRecording"),
        ("film.mp4", samples.mp4_bytes(), "videoRecording"),
        # No meta tag of an image names a type Zotero takes for one: it stays the default.
        ("bild.png", samples.png_bytes(), "journalArticle"),
    ],
)
def test_zotero_takes_each_kind_of_record_for_what_it_is(
    api: Api, alice: Account, name: str, data: bytes, expected: str
):
    record = api.create(alice, name, data, titel="Titel", autoren="Muster, Erika")
    page = document(api, record["id"])
    assert zotero.item_type(page) == expected
    if expected == "report":  # ... of this institution
        [institution] = page.xpath("//meta[@name='citation_technical_report_institution']/@content")
        assert institution == "File repository"


def test_highwire_names_each_creator_with_orcid_and_institutions(
    api: Api, admin: Account, alice: Account
):
    api.client.post("/api/series", json={"slug": "fb", "title": "FB"}, headers=admin.auth)
    record = api.create(
        alice,
        titel="Bericht",
        creators=json.dumps([ERIKA, PERSON, INSTITUTE]),
        series=json.dumps({"slug": "fb", "number": "7/2026"}),
    )
    tags = [
        (meta.get("name"), meta.get("content"))
        for meta in document(api, record["id"]).xpath("//meta[starts-with(@name, 'citation_')]")
    ]
    assert tags[:6] == [
        ("citation_title", "Bericht"),
        ("citation_author", "Muster, Erika"),
        ("citation_author_orcid", f"https://orcid.org/{ORCID}"),
        ("citation_author_institution", "Institut für Beispiele"),
        ("citation_author", "Beispiel, Max"),
        ("citation_author", "Institut für Beispiele"),
    ]
    assert ("citation_technical_report_number", "7/2026") in tags
    assert ("citation_series_title", "FB") in tags


def test_json_ld_names_authors_by_orcid_with_affiliations_and_what_it_belongs_to(
    api: Api, admin: Account, alice: Account
):
    api.client.post("/api/series", json={"slug": "fb", "title": "FB"}, headers=admin.auth)
    data = dataset(api, alice)
    record = api.create(
        alice,
        titel="Bericht",
        creators=json.dumps([ERIKA, INSTITUTE]),
        series=json.dumps({"slug": "fb", "number": "7"}),
        related_identifiers=json.dumps(
            [link(data["id"], "References"), link("10.1234/abc", "IsPartOf", "DOI")]
        ),
    )
    item = json_ld(api, record["id"])
    assert item["author"] == [
        {
            "@type": "Person",
            "@id": f"https://orcid.org/{ORCID}",
            "name": "Muster, Erika",
            "familyName": "Muster",
            "givenName": "Erika",
            "sameAs": "https://d-nb.info/gnd/118540238",
            "affiliation": [
                {
                    "@type": "Organization",
                    "@id": f"https://ror.org/{ROR}",
                    "name": "Institut für Beispiele",
                }
            ],
        },
        {"@type": "Organization", "name": "Institut für Beispiele"},
    ]
    assert item["isPartOf"] == [
        {
            "@type": "CreativeWorkSeries",
            "@id": f"{BASE}/series/fb",
            "name": "FB",
            "url": f"{BASE}/series/fb",
            "position": "7",
        },
        {
            "@type": "CreativeWork",
            "@id": "https://doi.org/10.1234/abc",
            "url": "https://doi.org/10.1234/abc",
        },
    ]
    page = f"{BASE}/records/{data['id']}"
    assert item["citation"] == [{"@type": "Dataset", "@id": page, "name": "Quoten", "url": page}]


def test_exports_carry_structured_creators(api: Api, alice: Account):
    record = api.create(alice, titel="Bericht", creators=json.dumps([ERIKA, PERSON, INSTITUTE]))
    [csl] = json.loads(export(api, record["id"], "csl-json"))
    assert csl["author"] == [
        {"family": "Muster", "given": "Erika"},
        {"family": "Beispiel", "given": "Max"},
        {"literal": "Institut für Beispiele"},
    ]
    [entry] = bibtexparser.parse_string(export(api, record["id"], "bibtex")).entries
    assert entry["author"] == "Muster, Erika and Beispiel, Max and {Institut für Beispiele}"
    [ris] = rispy.loads(export(api, record["id"], "ris"))
    assert ris["authors"] == ["Muster, Erika", "Beispiel, Max", "Institut für Beispiele"]


def test_datacite_xml_has_identifiers_affiliations_and_every_link(api: Api, alice: Account):
    data = dataset(api, alice)
    older = api.create(
        alice,
        titel="Bericht",
        creators=json.dumps([ERIKA, INSTITUTE]),
        related_identifiers=json.dumps(
            [link(data["id"]), link("https://example.org/x", "References", "URL")]
        ),
    )
    newer = edition(api, alice, older["id"]).get_json()["files"][0]
    hidden = api.create(
        alice, freigabe="false", related_identifiers=json.dumps([link(older["id"])])
    )
    root = etree.fromstring(export(api, older["id"], "datacite").encode())
    assert DATACITE_XSD.validate(root), DATACITE_XSD.error_log
    [erika, institute] = root.findall("d:creators/d:creator", D)
    assert erika.find("d:creatorName", D).get("nameType") == "Personal"
    identifiers = {
        e.get("nameIdentifierScheme"): (e.text, e.get("schemeURI"))
        for e in erika.findall("d:nameIdentifier", D)
    }
    assert identifiers == {
        "ORCID": (f"https://orcid.org/{ORCID}", "https://orcid.org"),
        "GND": ("https://d-nb.info/gnd/118540238", "https://d-nb.info/gnd/"),
    }
    affiliation = erika.find("d:affiliation", D)
    assert (affiliation.text, affiliation.get("affiliationIdentifier")) == (
        "Institut für Beispiele",
        f"https://ror.org/{ROR}",
    )
    assert affiliation.get("affiliationIdentifierScheme") == "ROR"
    assert institute.find("d:creatorName", D).get("nameType") == "Organizational"
    related = [
        (
            e.get("relationType"),
            e.get("relatedIdentifierType"),
            e.text,
            e.get("resourceTypeGeneral"),
        )
        for e in root.findall("d:relatedIdentifiers/d:relatedIdentifier", D)
    ]
    assert related == [
        ("IsSupplementedBy", "URL", f"{BASE}/records/{data['id']}", "Dataset"),
        ("References", "URL", "https://example.org/x", None),
        ("IsPreviousVersionOf", "URL", f"{BASE}/records/{newer['id']}", "Text"),
    ]
    assert hidden["id"] not in export(api, older["id"], "datacite")


def test_the_publication_date_under_embargo_is_its_end_everywhere(api: Api, alice: Account):
    record = api.create(alice, titel="Bericht", autoren="Muster, Erika", sperrfrist="2099-03-04")
    page = document(api, record["id"])
    [stated] = page.xpath("//meta[@name='citation_publication_date']/@content")
    assert stated == "2099/03/04"
    assert json_ld(api, record["id"])["datePublished"] == "2099-03-04"
    [entry] = bibtexparser.parse_string(export(api, record["id"], "bibtex")).entries
    assert (entry["year"], entry["date"]) == ("2099", "2099-03-04")
    [ris] = rispy.loads(export(api, record["id"], "ris"))
    assert (ris["year"], ris["date"]) == ("2099", "2099/03/04")
    [csl] = json.loads(export(api, record["id"], "csl-json"))
    assert csl["issued"] == {"date-parts": [[2099, 3, 4]]}
    assert "(2099)" in page.xpath("//p[@class='citation']")[0].text_content()
    root = etree.fromstring(export(api, record["id"], "datacite").encode())
    assert root.findtext("d:publicationYear", namespaces=D) == "2099"
    dates = {e.get("dateType"): e.text for e in root.findall("d:dates/d:date", D)}
    assert dates["Issued"] == dates["Available"] == "2099-03-04"
    dc = etree.fromstring(export(api, record["id"], "dc").encode())
    assert dc.findtext("dc:date", namespaces=NS) == "2099-03-04"
    assert date.today().isoformat() not in export(api, record["id"], "csl-json")


def test_oai_dc_names_the_creators_and_the_links_the_public_may_follow(api: Api, alice: Account):
    data = dataset(api, alice)
    hidden = dataset(api, alice, freigabe="false")
    record = api.create(
        alice,
        creators=json.dumps([ERIKA, INSTITUTE]),
        related_identifiers=json.dumps([link(data["id"]), link(hidden["id"])]),
    )
    root = oai(api, verb="GetRecord", identifier=ident(record["id"]), metadataPrefix="oai_dc")
    dc = root.find(".//oai_dc:dc", NS)
    assert [e.text for e in dc.iterfind("dc:creator", NS)] == [
        "Muster, Erika",
        "Institut für Beispiele",
    ]
    assert [e.text for e in dc.iterfind("dc:relation", NS)] == [
        f"{BASE}/api/public/files/{data['id']}"
    ]
