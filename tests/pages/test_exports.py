"""A record's exports, read back by the parsers other systems use, and content negotiation on
its page. Every value is compared with the record."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import bibtexparser
import pybtex.database
import pytest
import rispy
from bibtexparser import middlewares
from citeproc import Citation, CitationItem, CitationStylesBibliography, CitationStylesStyle
from citeproc import formatter as citeproc_formatter
from citeproc.source.json import CiteProcJSON
from datacite import schema45
from lxml import etree, html

from app.pages import exports
from tests.support.api import Account, Api

BASE = "http://localhost"
TYPES = {
    "bibtex": "application/x-bibtex",
    "ris": "application/x-research-info-systems",
    "csl-json": "application/vnd.citationstyles.csl+json",
    "datacite": "application/vnd.datacite.datacite+xml",
    "dc": "application/x-dc+xml",
}
EXTENSIONS = {"bibtex": "bib", "ris": "ris", "csl-json": "json", "datacite": "xml", "dc": "xml"}
DATACITE = {"d": "http://datacite.org/schema/kernel-4"}
DC = {
    "dc": "http://purl.org/dc/elements/1.1/",
    "oai_dc": "http://www.openarchives.org/OAI/2.0/oai_dc/",
}
OAI_DC_XSD = etree.XMLSchema(etree.parse(str(Path(__file__).with_name("oai_dc.xsd"))))
#: What a user may type, in every part a format treats specially.
HOSTILE = 'Ein {Be}richt} \\ende 50 % "Zitat" <script>alert(1)</script>\nעברית 😀 & # $ _'


def one_line(text: str) -> str:
    return " ".join(text.split())


def export(api: Api, record_id: str, name: str, **kwargs: Any) -> Any:
    return api.client.get(f"/records/{record_id}/export/{name}", **kwargs)


@pytest.fixture
def report(api: Api, alice: Account) -> dict[str, Any]:
    return api.create(
        alice,
        "bericht.pdf",
        titel="Arbeitsmarkt 2026",
        autoren="Muster, Erika; Beispiel, Max",
        beschreibung="Ein Bericht.",
        sachschlagwoerter="Arbeit, Löhne",
        org_themen="Konjunktur",
    )


def published(record: dict[str, Any]) -> Any:
    return datetime.fromisoformat(record["created_at"]).astimezone(UTC).date()


def read_bibtex(text: str) -> Any:
    library = bibtexparser.parse_string(
        text,
        append_middleware=[middlewares.SeparateCoAuthors(), middlewares.LatexDecodingMiddleware()],
    )
    assert not library.failed_blocks
    (entry,) = library.entries
    return entry


def test_every_export_is_a_download_of_its_type(api: Api, report):
    for name, media_type in TYPES.items():
        response = export(api, report["id"], name)
        assert response.status_code == 200, name
        assert response.mimetype == media_type
        assert response.mimetype_params == {"charset": "utf-8"}
        filename = f"record-{report['id']}.{EXTENSIONS[name]}"
        assert response.headers["Content-Disposition"] == f'attachment; filename="{filename}"'
        assert response.headers["Cache-Control"] == "public, max-age=0, must-revalidate"
        assert "default-src 'self'" in response.headers["Content-Security-Policy"]
        again = export(api, report["id"], name, headers={"If-None-Match": response.headers["ETag"]})
        assert again.status_code == 304 and again.get_data() == b""
    etags = {export(api, report["id"], name).headers["ETag"] for name in TYPES}
    assert len(etags) == len(TYPES)


def test_bibtex_reads_back_as_the_record(api: Api, app, report):
    entry = read_bibtex(export(api, report["id"], "bibtex").get_data(as_text=True))
    assert entry.entry_type == "techreport"
    fields = {field.key: field.value for field in entry.fields}
    assert fields == {
        "title": "Arbeitsmarkt 2026",
        "author": ["Muster, Erika", "Beispiel, Max"],
        "year": str(published(report).year),
        "date": published(report).isoformat(),
        "institution": app.config["REPOSITORY_NAME"],
        "abstract": "Ein Bericht.",
        "keywords": "Arbeit, Löhne, Konjunktur",
        "url": f"{BASE}/records/{report['id']}",
    }


#: A RIS line: a tag of a capital letter and a capital or digit, two spaces, a hyphen, a space.
RIS_LINE = re.compile(r"[A-Z][A-Z0-9]  - .*")


def test_ris_begins_with_its_type_and_is_read_by_a_second_parser(api: Api, app, report):
    """RIS as the format has it: `TY  - ` first, then nothing but tagged lines up to `ER  - `;
    pybtexris (pybtex's RIS reader) reads it back as well as rispy does."""
    text = export(api, report["id"], "ris").get_data(as_text=True)
    lines = text.splitlines()
    assert lines[0] == "TY  - RPRT" and lines[-1] == "ER  - "
    assert [line for line in lines if not RIS_LINE.fullmatch(line)] == []
    (entry,) = pybtex.database.parse_string(text, "ris").entries.values()
    assert entry.type == "techreport"
    assert [str(person) for person in entry.persons["author"]] == [
        "Muster, Erika",
        "Beispiel, Max",
    ]
    assert entry.fields["title"] == "Arbeitsmarkt 2026"
    assert entry.fields["year"] == str(published(report).year)
    assert entry.fields["url"] == f"{BASE}/records/{report['id']}"
    assert entry.fields["publisher"] == app.config["REPOSITORY_NAME"]
    assert entry.fields["abstract"] == "Ein Bericht."


def test_ris_reads_back_as_the_record(api: Api, app, report):
    (entry,) = rispy.loads(export(api, report["id"], "ris").get_data(as_text=True))
    assert entry == {
        "type_of_reference": "RPRT",
        "title": "Arbeitsmarkt 2026",
        "authors": ["Muster, Erika", "Beispiel, Max"],
        "year": str(published(report).year),
        "date": published(report).strftime("%Y/%m/%d"),
        "publisher": app.config["REPOSITORY_NAME"],
        "urls": [f"{BASE}/records/{report['id']}"],
        "type_of_work": "application/pdf",
        "language": "de",
        "abstract": "Ein Bericht.",
        "keywords": ["Arbeit", "Löhne", "Konjunktur"],
        "file_attachments1": f"{BASE}/api/public/files/{report['id']}/download",
    }


def render_csl(items: list[dict[str, Any]]) -> str:
    """The items as citeproc-py renders them: it reads them as a CSL-JSON source."""
    import citeproc

    style = CitationStylesStyle(
        str(Path(citeproc.STYLES_PATH) / "harvard-cite-them-right.csl"), validate=False
    )
    bibliography = CitationStylesBibliography(style, CiteProcJSON(items), citeproc_formatter.plain)
    bibliography.register(Citation([CitationItem(items[0]["id"])]))
    return str(bibliography.bibliography()[0])


def test_csl_json_reads_back_as_the_record_and_renders(api: Api, app, report):
    items = json.loads(export(api, report["id"], "csl-json").get_data())
    day = published(report)
    assert items == [
        {
            "id": report["id"],
            "type": "report",
            "title": "Arbeitsmarkt 2026",
            "author": [
                {"family": "Muster", "given": "Erika"},
                {"family": "Beispiel", "given": "Max"},
            ],
            "issued": {"date-parts": [[day.year, day.month, day.day]]},
            "publisher": app.config["REPOSITORY_NAME"],
            "URL": f"{BASE}/records/{report['id']}",
            "abstract": "Ein Bericht.",
            "keyword": "Arbeit, Löhne, Konjunktur",
        }
    ]
    assert render_csl(items) == (
        f"Muster, E. and Beispiel, M. ({day.year}) Arbeitsmarkt 2026. "
        f"{app.config['REPOSITORY_NAME']}. Available at: {BASE}/records/{report['id']}."
    )


def test_datacite_xml_reads_back_as_the_record(api: Api, app, report):
    response = export(api, report["id"], "datacite")
    root = etree.fromstring(response.get_data())
    assert root.tag == "{http://datacite.org/schema/kernel-4}resource"

    def texts(path: str) -> list[str]:
        return [element.text for element in root.iterfind(path, DATACITE)]

    page_url = f"{BASE}/records/{report['id']}"
    assert root.find("d:identifier", DATACITE).get("identifierType") == "URL"
    assert texts("d:identifier") == [page_url]
    assert texts("d:alternateIdentifiers/d:alternateIdentifier") == [report["id"]]
    assert texts("d:creators/d:creator/d:creatorName") == ["Muster, Erika", "Beispiel, Max"]
    assert texts("d:creators/d:creator/d:familyName") == ["Muster", "Beispiel"]
    assert texts("d:creators/d:creator/d:givenName") == ["Erika", "Max"]
    assert texts("d:titles/d:title") == ["Arbeitsmarkt 2026"]
    assert texts("d:publisher") == [app.config["REPOSITORY_NAME"]]
    assert texts("d:publicationYear") == [str(published(report).year)]
    resource_type = root.find("d:resourceType", DATACITE)
    assert (resource_type.get("resourceTypeGeneral"), resource_type.text) == ("Text", "Report")
    assert texts("d:subjects/d:subject") == ["Arbeit", "Löhne", "Konjunktur"]
    assert texts("d:dates/d:date") == [published(report).isoformat()]
    assert texts("d:sizes/d:size") == [f"{api.row(report['id']).size} bytes"]
    assert texts("d:formats/d:format") == ["application/pdf"]
    assert texts("d:descriptions/d:description") == ["Ein Bericht."]


def test_a_word_that_is_keyword_and_theme_is_one_valid_datacite_subject(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    """Issue 36 finding 7: DataCite's subjects are unique items, so a word both keyword and
    theme failed the schema's validation and the export answered 500."""
    record = api.create(
        alice,
        "bericht.pdf",
        sachschlagwoerter="Arbeit, Löhne, Arbeit",
        org_themen="Arbeit; Konjunktur; Löhne",
    )
    validated: list[dict[str, Any]] = []
    metadata = exports.datacite_metadata

    def kept(page: Any) -> dict[str, Any]:
        validated.append(metadata(page))
        return validated[-1]

    monkeypatch.setattr(exports, "datacite_metadata", kept)
    response = export(api, record["id"], "datacite")
    assert response.status_code == 200
    root = etree.fromstring(response.get_data())
    subjects = [element.text for element in root.iterfind("d:subjects/d:subject", DATACITE)]
    assert subjects == ["Arbeit", "Löhne", "Konjunktur"]
    (data,) = validated
    schema45.validator.validate(data)
    assert (
        api.client.get(
            f"/records/{record['id']}", headers={"Accept": TYPES["datacite"]}
        ).status_code
        == 200
    )


def test_dublin_core_is_valid_oai_dc_and_reads_back_as_the_record(api: Api, app, report):
    root = etree.fromstring(export(api, report["id"], "dc").get_data())
    OAI_DC_XSD.assertValid(root)
    values = [(etree.QName(element).localname, element.text) for element in root]
    assert values == [
        ("title", "Arbeitsmarkt 2026"),
        ("creator", "Muster, Erika"),
        ("creator", "Beispiel, Max"),
        ("subject", "Arbeit"),
        ("subject", "Löhne"),
        ("subject", "Konjunktur"),
        ("description", "Ein Bericht."),
        ("publisher", app.config["REPOSITORY_NAME"]),
        ("date", published(report).isoformat()),
        ("type", "Text"),
        ("format", "application/pdf"),
        ("identifier", f"{BASE}/records/{report['id']}"),
        ("identifier", f"{BASE}/api/public/files/{report['id']}/download"),
    ]


def test_hostile_metadata_keeps_every_export_parseable(api: Api, alice: Account):
    record = api.create(
        alice,
        "bericht.pdf",
        titel=HOSTILE,
        autoren=f"{{Klammer}}, Anna}}; Rock and Roll; {HOSTILE}",
        beschreibung=HOSTILE,
        sachschlagwoerter="50 %, a}b",
    )
    record_id = record["id"]
    bib = read_bibtex(export(api, record_id, "bibtex").get_data(as_text=True))
    assert bib.fields_dict["title"].value == one_line(HOSTILE)
    assert bib.fields_dict["abstract"].value == one_line(HOSTILE)
    # Three authors, each whole: "and" inside a name does not split it.
    assert len(bib.fields_dict["author"].value) == 3
    (ris,) = rispy.loads(export(api, record_id, "ris").get_data(as_text=True))
    assert ris["title"] == one_line(HOSTILE) and ris["abstract"] == one_line(HOSTILE)
    assert ris["authors"] == ["{Klammer}, Anna}", "Rock and Roll", one_line(HOSTILE)]
    assert ris["keywords"] == ["50 %", "a}b"]
    items = json.loads(export(api, record_id, "csl-json").get_data())
    assert items[0]["title"] == HOSTILE
    assert "alert(1)" in render_csl(items)
    datacite = etree.fromstring(export(api, record_id, "datacite").get_data())
    assert datacite.findtext("d:titles/d:title", namespaces=DATACITE) == HOSTILE
    dc = etree.fromstring(export(api, record_id, "dc").get_data())
    OAI_DC_XSD.assertValid(dc)
    assert dc.findtext("dc:title", namespaces=DC) == HOSTILE


def test_under_embargo_exports_carry_metadata_but_no_content_address(api: Api, alice: Account):
    until = (datetime.now(UTC).date() + timedelta(days=3)).isoformat()
    record = api.create(alice, "e.pdf", titel="Gesperrt", sperrfrist=until)
    download = f"/api/public/files/{record['id']}/download"
    for name in TYPES:
        response = export(api, record["id"], name)
        assert response.status_code == 200
        assert "Gesperrt" in response.get_data(as_text=True)
        assert download not in response.get_data(as_text=True), name
    datacite = etree.fromstring(export(api, record["id"], "datacite").get_data())
    dates = datacite.findall("d:dates/d:date", DATACITE)
    assert [(date.get("dateType"), date.text) for date in dates][1] == ("Available", until)
    # No author typed: DataCite's standard value for "unavailable".
    assert datacite.findtext("d:creators/d:creator/d:creatorName", namespaces=DATACITE) == ":unav"


def test_exports_have_the_pages_visibility(api: Api, alice: Account, report):
    unreleased = api.create(alice, "u.pdf", freigabe="false", titel="Geheim")
    for path in (
        f"/records/{unreleased['id']}/export/bibtex",
        f"/records/{report['id']}/export/marc",
        "/records/00000000-0000-4000-8000-000000000000/export/ris",
    ):
        response = api.client.get(path)
        assert response.status_code == 404 and response.mimetype == "text/html"
        assert "Geheim" not in response.get_data(as_text=True)
    hidden = api.client.get(
        f"/records/{unreleased['id']}", headers={"Accept": "application/x-bibtex"}
    )
    assert hidden.status_code == 404


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, "text/html"),
        ("*/*", "text/html"),
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "text/html"),
        *((media_type, media_type) for media_type in TYPES.values()),
        ("application/x-bibtex;q=0.5, application/x-research-info-systems", TYPES["ris"]),
        ("text/html;q=0.1, application/vnd.citationstyles.csl+json", TYPES["csl-json"]),
        ("application/x-bibtex;q=0, */*;q=0.1", "text/html"),
    ],
)
def test_content_negotiation_answers_the_preferred_format(api: Api, report, accept, expected):
    headers = {"Accept": accept} if accept else {}
    response = api.client.get(f"/records/{report['id']}", headers=headers)
    assert response.status_code == 200
    assert response.mimetype == expected
    assert "Accept" in response.vary and "Accept-Language" in response.vary
    if expected != "text/html":
        name = next(name for name, media_type in TYPES.items() if media_type == expected)
        assert response.get_data() == export(api, report["id"], name).get_data()
        assert response.headers["ETag"] == export(api, report["id"], name).headers["ETag"]


def test_a_format_the_page_cannot_give_is_406_listing_what_it_can(api: Api, report):
    for accept in ("image/png", "application/x-bibtex;q=0, text/html;q=0"):
        response = api.client.get(f"/records/{report['id']}", headers={"Accept": accept})
        assert response.status_code == 406
        assert response.mimetype == "text/plain"
        assert "Accept" in response.vary
        lines = response.get_data(as_text=True).splitlines()
        assert lines[1:] == ["text/html", *TYPES.values()]


def test_the_cite_box_formats_the_citation_and_links_every_export(api: Api, app, report):
    response = api.client.get(f"/records/{report['id']}")
    document = html.fromstring(response.get_data())
    (box,) = document.xpath("//section[@class='cite']")
    year = published(report).year
    citation = box.xpath("string(p[@class='citation'])")
    assert citation == (
        f"Muster, E. und Beispiel, M. ({year}) Arbeitsmarkt 2026. "
        f"{app.config['REPOSITORY_NAME']}. Verfügbar unter: {BASE}/records/{report['id']}."
    )
    assert box.xpath("p[@class='citation']/i/text()") == ["Arbeitsmarkt 2026"]
    links = [(a.text, a.get("href"), a.get("type")) for a in box.xpath(".//ul/li/a")]
    assert links == [
        (label, f"{BASE}/records/{report['id']}/export/{name}", TYPES[name])
        for label, name in [
            ("BibTeX", "bibtex"),
            ("RIS", "ris"),
            ("CSL-JSON", "csl-json"),
            ("DataCite XML", "datacite"),
            ("Dublin Core XML", "dc"),
        ]
    ]
    english = api.client.get(f"/records/{report['id']}?lang=en")
    box = html.fromstring(english.get_data()).xpath("//section[@class='cite']")[0]
    assert box.xpath("string(p[@class='citation'])").startswith("Muster, E. and Beispiel, M.")


# --- a change made by SQL (issue 36, finding 12) -----------------------------------------


def change_by_sql(api: Api, record_id: str, **values: Any) -> None:
    """As an operator fixing a row by hand: only the named columns, `updated_at` untouched."""
    import uuid

    from sqlalchemy import update

    from app.extensions import db
    from app.models import FileRecord

    table = FileRecord.__table__
    with api.app.app_context():
        db.session.execute(
            update(table)
            .where(table.c.id == uuid.UUID(record_id))
            .values(**values, updated_at=table.c.updated_at)
        )
        db.session.commit()


@pytest.mark.parametrize(
    "address",
    ["/records/{}", *(f"/records/{{}}/export/{name}" for name in TYPES), "/api/public/feed.atom"],
)
def test_a_change_by_sql_changes_the_etag_of_what_shows_it(api: Api, alice: Account, address: str):
    """The ETag follows what is served: a title fixed by SQL (no `updated_at` touched) is a
    200 with the new text and a new ETag for the old `If-None-Match`; unchanged, a 304."""
    record = api.create(alice, "bericht.pdf", titel="Alter Titel", autoren="Muster, Erika")
    url = address.format(record["id"])
    before = api.client.get(url)
    assert before.status_code == 200 and "Alter Titel" in before.get_data(as_text=True)
    old = before.headers["ETag"]
    assert api.client.get(url, headers={"If-None-Match": old}).status_code == 304
    updated_at = api.get(f"/api/files/{record['id']}", alice).get_json()["updated_at"]
    change_by_sql(api, record["id"], titel="Neuer Titel")
    assert api.get(f"/api/files/{record['id']}", alice).get_json()["updated_at"] == updated_at
    after = api.client.get(url, headers={"If-None-Match": old})
    assert after.status_code == 200
    text = after.get_data(as_text=True)
    assert "Neuer Titel" in text and "Alter Titel" not in text
    assert after.headers["ETag"] != old
    again = api.client.get(url, headers={"If-None-Match": after.headers["ETag"]})
    assert again.status_code == 304


def test_a_change_by_sql_reaches_the_stored_citation_with_refresh_citations(
    api: Api, alice: Account
):
    """The stored Cite box (`record_citations`) no longer fits a title changed by SQL: the
    page renders the new one at once, and `flask pages refresh-citations` stores it."""
    from app.pages.cli import refresh_citations

    record = api.create(alice, "bericht.pdf", titel="Alter Titel", autoren="Muster, Erika")
    url = f"/records/{record['id']}"
    old = api.client.get(url).headers["ETag"]
    change_by_sql(api, record["id"], titel="Neuer Titel")
    page = api.client.get(url, headers={"If-None-Match": old})
    assert page.status_code == 200
    (box,) = html.fromstring(page.get_data()).xpath("//p[@class='citation']")
    assert "<i>Neuer Titel</i>" in html.tostring(box, encoding="unicode")
    with api.app.app_context():
        checked, written = refresh_citations(api.app.config["REPOSITORY_NAME"])
        from sqlalchemy import select

        from app.extensions import db
        from app.models import RecordCitation

        (stored,) = db.session.scalars(select(RecordCitation.de)).all()
    assert written == 1 and "Neuer Titel" in stored
    # What the page shows did not change, whether it was rendered or stored.
    refreshed = api.client.get(url, headers={"If-None-Match": page.headers["ETag"]})
    if refreshed.status_code == 200:
        (again,) = html.fromstring(refreshed.get_data()).xpath("//p[@class='citation']")
        assert html.tostring(again, encoding="unicode") == html.tostring(box, encoding="unicode")
    else:
        assert refreshed.status_code == 304
