"""A record's landing page: what people see, what parsers read, and that it is safe and
cacheable. The public API's visibility rules decide which pages exist."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import extruct
import pytest
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import html
from requests.utils import parse_header_links

from tests.support import samples
from tests.support.api import Account, Api

PUBLIC_CACHE = "public, max-age=0, must-revalidate"
EXPORT_TYPES = {
    "bibtex": "application/x-bibtex",
    "ris": "application/x-research-info-systems",
    "csl-json": "application/vnd.citationstyles.csl+json",
    "datacite": "application/vnd.datacite.datacite+xml",
    "dc": "application/x-dc+xml",
}
BASE = "http://localhost"


def tomorrow() -> str:
    return (datetime.now(UTC).date() + timedelta(days=1)).isoformat()


def page(api: Api, record_id: str, **kwargs: Any) -> Any:
    return api.client.get(f"/records/{record_id}", **kwargs)


def tree(response: Any) -> Any:
    return html.fromstring(response.get_data())


def meta(document: Any, name: str) -> list[str]:
    return document.xpath("//meta[@name=$name]/@content", name=name)


def json_ld(response: Any) -> dict[str, Any]:
    data = extruct.extract(response.get_data(as_text=True), base_url=BASE, syntaxes=["json-ld"])
    (item,) = data["json-ld"]
    return item


def open_graph(response: Any) -> dict[str, list[str]]:
    data = extruct.extract(
        response.get_data(as_text=True), base_url=BASE, syntaxes=["opengraph"], uniform=False
    )
    (item,) = data["opengraph"]
    values: dict[str, list[str]] = {}
    for key, value in item["properties"]:
        values.setdefault(key, []).append(value)
    return values


@pytest.fixture
def report(api: Api, alice: Account) -> dict[str, Any]:
    return api.create(
        alice,
        "bericht.pdf",
        titel="Arbeitsmarkt 2026",
        autoren="Muster, Erika; Beispiel, Max",
        beschreibung="Ein Bericht.\nZweite Zeile.",
        sachschlagwoerter="Arbeit, Löhne; Tarif",
        org_themen="Konjunktur",
        path="berichte/2026/q1",
    )


def test_a_released_record_has_a_page_with_everything_a_reader_needs(api: Api, report):
    response = page(api, report["id"])
    assert response.status_code == 200
    assert response.mimetype == "text/html"
    assert response.headers["Cache-Control"] == PUBLIC_CACHE
    document = tree(response)
    assert document.xpath("string(//h1)") == "Arbeitsmarkt 2026"
    assert document.xpath("string(//p[@class='authors'])") == "Muster, Erika; Beispiel, Max"
    published = datetime.fromisoformat(report["created_at"]).astimezone(UTC).date()
    assert document.xpath("//time/@datetime") == [published.isoformat()]
    assert "Ein Bericht.\nZweite Zeile." in document.xpath("string(//div[@class='description'])")
    assert document.xpath("//ul[@class='tags']")[0].xpath("li/text()") == [
        "Arbeit",
        "Löhne",
        "Tarif",
    ]
    assert document.xpath("//ul[@class='tags']")[1].xpath("li/text()") == ["Konjunktur"]
    # Each folder links to its page, which lists the record or the folder below.
    crumbs = document.xpath("//ol[@class='breadcrumbs']/li/a")
    assert [a.text for a in crumbs] == ["Alle Ordner", "berichte", "2026", "q1"]
    folders = ["", "berichte", "berichte/2026", "berichte/2026/q1"]
    assert [a.get("href") for a in crumbs] == [f"{BASE}/browse/{f}" for f in folders]
    below_each = [*(a.text for a in crumbs[1:]), "Arbeitsmarkt 2026"]
    for crumb, below in zip(crumbs, below_each, strict=True):
        folder = tree(api.client.get(crumb.get("href")))
        assert below in folder.xpath("//main//a/text()"), crumb.get("href")
    details = dict(zip(document.xpath("//dt/text()"), document.xpath("//dd"), strict=True))
    assert details["Dateiname"].text_content() == "bericht.pdf"
    assert details["Typ"].text_content() == "application/pdf"
    assert f"({report['size']:,} Byte)".replace(",", ".") in details["Größe"].text_content()
    assert details["SHA-256"].text_content() == api.row(report["id"]).checksum_sha256
    download = f"{BASE}/api/public/files/{report['id']}/download"
    assert document.xpath("//a[@class='download']/@href") == [download]
    (frame,) = document.xpath("//iframe")
    assert frame.get("src") == f"{BASE}/records/{report['id']}/preview"
    # Sandboxed by the preview's own policy: Chromium shows no PDF in an `<iframe sandbox>`.
    assert frame.get("sandbox") is None
    preview = api.client.get(frame.get("src"))
    assert preview.headers["Content-Security-Policy"].split("; ")[-1] == "sandbox"
    assert api.client.get(download).get_data() == samples.pdf_bytes()


@pytest.mark.parametrize(
    ("language", "small", "large"),
    [("de", "29 Byte", "1,6 kB (1.552 Byte)"), ("en", "29 bytes", "1.6 kB (1,552 bytes)")],
)
def test_a_size_is_shown_once_in_the_readers_unit(
    api: Api, alice: Account, language: str, small: str, large: str
):
    """The exact count of bytes follows a rounded size only; English pages say "bytes"."""
    sizes = {}
    for name, data in (("notiz.txt", b"A note of twenty-nine bytes.\n"), ("bericht.pdf", None)):
        record = api.create(alice, name, data)
        document = tree(page(api, record["id"], query_string={"lang": language}))
        details = dict(zip(document.xpath("//dt/text()"), document.xpath("//dd"), strict=True))
        sizes[record["size"]] = details["Größe" if language == "de" else "Size"].text_content()
    assert sizes == {29: small, 1552: large}


@pytest.mark.parametrize(
    ("language", "available"), [("de", "Verfügbar unter"), ("en", "Available at")]
)
def test_a_record_without_authors_is_cited_by_its_title_once(
    api: Api, alice: Account, language: str, available: str
):
    record = api.create(alice, "bericht.pdf", titel="Arbeitsmarkt 2026")
    document = tree(page(api, record["id"], query_string={"lang": language}))
    year = datetime.fromisoformat(record["created_at"]).astimezone(UTC).year
    repository = api.app.config["REPOSITORY_NAME"]
    assert document.xpath("string(//p[@class='citation'])") == (
        f"Arbeitsmarkt 2026 ({year}). {repository}. {available}: {BASE}/records/{record['id']}."
    )


def test_the_pdf_preview_is_the_public_download_shown_inline(api: Api, alice: Account, report):
    preview = api.client.get(f"/records/{report['id']}/preview")
    assert preview.status_code == 200 and preview.get_data() == samples.pdf_bytes()
    assert preview.mimetype == "application/pdf"
    assert preview.headers["Content-Disposition"].startswith('inline; filename="bericht.pdf"')
    assert preview.headers["X-Content-Type-Options"] == "nosniff"
    assert preview.headers["Content-Security-Policy"] == (
        "default-src 'self'; base-uri 'none'; form-action 'self'; sandbox"
    )
    assert preview.headers["Cache-Control"] == PUBLIC_CACHE
    ranged = api.client.get(f"/records/{report['id']}/preview", headers={"Range": "bytes=0-3"})
    assert ranged.status_code == 206 and ranged.get_data() == b"%PDF"
    embargoed = api.create(alice, "e.pdf", sperrfrist=tomorrow())
    image = api.create(alice, "bild.png", samples.png_bytes())
    for record_id, status in ((embargoed["id"], 403), (image["id"], 404)):
        refused = api.client.get(f"/records/{record_id}/preview")
        assert refused.status_code == status and refused.mimetype == "text/html"
        assert b"%PDF" not in refused.get_data()


@pytest.mark.parametrize(
    ("name", "data", "element"),
    [
        ("folge.mp3", samples.mp3_bytes(), "audio"),
        ("film.mp4", samples.mp4_bytes(), "video"),
        ("bild.png", samples.png_bytes(), "img"),
    ],
)
def test_media_play_and_images_show_from_the_public_download(
    api: Api, alice: Account, name: str, data: bytes, element: str
):
    record = api.create(alice, name, data, titel="Medium")
    document = tree(page(api, record["id"]))
    download = f"{BASE}/api/public/files/{record['id']}/download"
    assert document.xpath(f"//section[@class='preview']/{element}/@src") == [download]
    assert not document.xpath("//iframe")
    # Seeking in a player asks for a range of the same address.
    ranged = api.client.get(download, headers={"Range": "bytes=2-9"})
    assert ranged.status_code == 206 and ranged.get_data() == data[2:10]


def test_a_csv_shows_its_first_rows_as_a_table(api: Api, alice: Account):
    record = api.create(alice, "daten.csv", samples.csv_bytes(delimiter=";"))
    table = tree(page(api, record["id"])).xpath("//section[@class='preview']//table")[0]
    assert table.xpath("thead/tr/th/text()") == ["id", "titel", "autor"]
    assert [row.xpath("td/text()") for row in table.xpath("tbody/tr")] == [
        ["1", "Über Dateien", "Müller, Anna"],
        ["2", 'Ein "Zitat"', "Schmidt"],
    ]


def test_a_large_csv_shows_a_bounded_table_of_complete_rows(api: Api, alice: Account):
    """Only the first 64 KiB are read: rows of 10 kB leave six whole ones, the seventh is cut;
    short rows stop at twenty, the header included."""
    wide = ("a,b\n" + ("x" * 10_000 + ",<b>y</b>\n") * 30).encode()
    record = api.create(alice, "breit.csv", wide, sperrfrist=tomorrow())
    assert not tree(page(api, record["id"])).xpath("//table")  # no content under embargo
    api.set_columns(record["id"], sperrfrist=None)
    document = tree(page(api, record["id"]))
    rows = document.xpath("//table/tbody/tr")
    assert [row.xpath("td/text()") for row in rows] == [["x" * 10_000, "<b>y</b>"]] * 6
    assert not document.xpath("//table//b")
    long = ("a,b\n" + "1,2\n" * 1000).encode()
    record = api.create(alice, "lang.csv", long)
    assert len(tree(page(api, record["id"])).xpath("//table/tbody/tr")) == 19


def test_a_csv_whose_content_is_missing_still_has_its_page(api: Api, alice: Account):
    record = api.create(alice, "daten.csv", samples.csv_bytes(), titel="Daten")
    api.app.extensions["storage"].delete(api.row(record["id"]).stored_path)
    response = page(api, record["id"])
    assert response.status_code == 200
    assert tree(response).xpath("string(//h1)") == "Daten" and not tree(response).xpath("//table")


def test_an_embargoed_record_has_a_page_that_states_it_and_offers_no_content(
    api: Api, alice: Account
):
    record = api.create(alice, "bericht.pdf", sperrfrist=tomorrow(), titel="Gesperrt")
    response = page(api, record["id"])
    assert response.status_code == 200
    document = tree(response)
    assert "Sperrfrist bis" in document.xpath("string(//p[@class='embargo'])")
    assert document.xpath("//p[@class='embargo']/time/@datetime") == [tomorrow()]
    # Not published yet: the page says from when it is available, never "published".
    assert "Verfügbar ab" in document.xpath("string(//p[@class='date'])")
    assert document.xpath("//p[@class='date']/time/@datetime") == [tomorrow()]
    assert "eröffentlicht" not in document.xpath("string(//main)")
    english = tree(page(api, record["id"], query_string={"lang": "en"}))
    assert "Available from" in english.xpath("string(//p[@class='date'])")
    assert "ublished" not in english.xpath("string(//main)")
    assert not document.xpath("//a[@class='download'] | //iframe | //audio | //video | //img")
    assert "/download" not in response.get_data(as_text=True)
    assert meta(document, "citation_title") == ["Gesperrt"]
    assert meta(document, "citation_pdf_url") == []
    assert "contentUrl" not in json_ld(response)["encoding"]


def test_unreleased_unknown_and_malformed_ids_get_the_same_html_404(api: Api, alice: Account):
    unreleased = api.create(alice, "u.pdf", freigabe="false", titel="Geheim")
    answers = [
        page(api, unreleased["id"]),
        page(api, "00000000-0000-4000-8000-000000000000"),
        page(api, "not-an-id"),
        api.client.get(f"/records/{unreleased['id']}/more"),
    ]
    for response in answers:
        assert response.status_code == 404
        assert response.mimetype == "text/html"
        assert response.headers["Cache-Control"] == PUBLIC_CACHE
        assert "Content-Security-Policy" in response.headers
        assert tree(response).xpath("string(//h1)") == "Nicht gefunden"
        assert response.get_data() == answers[0].get_data()
    assert "Geheim" not in answers[0].get_data(as_text=True)
    # The API keeps its JSON errors.
    api_answer = api.client.get(f"/api/public/files/{unreleased['id']}")
    assert api_answer.status_code == 404 and api_answer.get_json() == {"message": "Not found."}


def test_a_changed_http_method_on_a_page_is_an_html_error(api: Api, report):
    response = api.client.post(f"/records/{report['id']}")
    assert response.status_code == 405 and response.mimetype == "text/html"
    assert "GET" in response.headers["Allow"]


def test_a_host_label_longer_than_idna_allows_is_a_400_everywhere(
    api: Api, report, caplog: pytest.LogCaptureFixture
):
    """Issue 36 finding 8: a Host label of 64 characters is no name (IDNA allows 63). Werkzeug
    answers 400 before any route; the pages' error page then had no URL adapter and answered
    500 with a traceback."""
    raw = FlaskClient(api.app)  # the API's 400 of a bad Host is in no OpenAPI operation
    api.app.config["PROPAGATE_EXCEPTIONS"] = False  # errors are logged, as in production
    host = "a" * 64 + ".example.org"
    pages = [
        "/",
        f"/records/{report['id']}",
        f"/records/{report['id']}/export/datacite",
        "/browse/",
        "/browse/berichte/2026",
        "/search?q=Arbeit",
        "/sitemap.xml",
        "/robots.txt",
        "/s/" + "A" * 43,
    ]
    with caplog.at_level(logging.DEBUG):
        for path in pages:
            response = raw.get(path, headers={"Host": host})
            assert (path, response.status_code, response.mimetype) == (path, 400, "text/html")
            assert tree(response).xpath("string(//h1)") == "Ungültige Anfrage"
        for path in ("/api/public/files", f"/api/public/files/{report['id']}"):
            response = raw.get(path, headers={"Host": host})
            assert (path, response.status_code) == (path, 400)
            assert response.get_json() == {"message": "Bad request."}
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def test_highwire_tags_name_the_record_for_google_scholar(api: Api, app, report):
    document = tree(page(api, report["id"]))
    published = datetime.fromisoformat(report["created_at"]).astimezone(UTC).date()
    assert meta(document, "citation_title") == ["Arbeitsmarkt 2026"]
    assert meta(document, "citation_author") == ["Muster, Erika", "Beispiel, Max"]
    assert meta(document, "citation_publication_date") == [published.strftime("%Y/%m/%d")]
    assert meta(document, "citation_keywords") == ["Arbeit; Löhne; Tarif"]
    assert meta(document, "citation_publisher") == [app.config["REPOSITORY_NAME"]]
    assert meta(document, "citation_pdf_url") == [
        f"{BASE}/api/public/files/{report['id']}/download"
    ]
    assert document.xpath("//link[@rel='canonical']/@href") == [f"{BASE}/records/{report['id']}"]


def test_signposting_and_alternates_point_to_the_other_descriptions(api: Api, alice, report):
    record_id = report["id"]
    oai = (
        f"{BASE}/oai?verb=GetRecord&metadataPrefix=oai_dc"
        f"&identifier=oai%3Afile-repository.local%3A{record_id}"
    )
    download = f"{BASE}/api/public/files/{record_id}/download"
    exports = [
        (media_type, f"{BASE}/records/{record_id}/export/{name}")
        for name, media_type in EXPORT_TYPES.items()
    ]
    response = page(api, record_id)
    links = parse_header_links(response.headers["Link"])
    assert links == [
        {"url": f"{BASE}/records/{record_id}", "rel": "cite-as"},
        {
            "url": f"{BASE}/api/public/files/{record_id}",
            "rel": "describedby",
            "type": "application/json",
        },
        {"url": oai, "rel": "describedby", "type": "text/xml"},
        *({"url": url, "rel": "describedby", "type": media_type} for media_type, url in exports),
        {"url": "https://schema.org/Report", "rel": "type"},
        {"url": "https://schema.org/AboutPage", "rel": "type"},
        {"url": download, "rel": "item", "type": "application/pdf"},
    ]
    for link in links[1:8] + links[10:]:
        answer = api.client.get(link["url"].removeprefix(BASE))
        assert answer.status_code == 200
        assert answer.mimetype == link.get("type", answer.mimetype)
    alternates = tree(response).xpath("//link[@rel='alternate']")
    assert [(a.get("type"), a.get("href")) for a in alternates] == [
        ("application/json", f"{BASE}/api/public/files/{record_id}"),
        ("text/xml", oai),
        *exports,
        ("application/atom+xml", f"{BASE}/api/public/feed.atom?path=berichte%2F2026%2Fq1"),
    ]
    feed = api.client.get("/api/public/feed.atom?path=berichte%2F2026%2Fq1")
    assert feed.status_code == 200 and record_id in feed.get_data(as_text=True)
    embargoed = api.create(alice, "e.pdf", sperrfrist=tomorrow())
    rels = [link["rel"] for link in parse_header_links(page(api, embargoed["id"]).headers["Link"])]
    assert "item" not in rels and "cite-as" in rels


def test_open_graph_and_twitter_cards_describe_the_record(api: Api, app, report):
    response = page(api, report["id"])
    assert open_graph(response) == {
        "og:type": ["article"],
        "og:title": ["Arbeitsmarkt 2026"],
        "og:url": [f"{BASE}/records/{report['id']}"],
        "og:site_name": [app.config["REPOSITORY_NAME"]],
        "og:locale": ["de_DE"],
        "og:description": ["Ein Bericht.\nZweite Zeile."],
    }
    document = tree(response)
    assert meta(document, "twitter:card") == ["summary"]
    assert meta(document, "twitter:title") == ["Arbeitsmarkt 2026"]


def test_json_ld_of_a_report_states_every_value_of_the_record(api: Api, app, report):
    row = api.row(report["id"])
    url = f"{BASE}/records/{report['id']}"
    assert json_ld(page(api, report["id"])) == {
        "@context": "https://schema.org",
        "@type": "Report",
        "@id": url,
        "url": url,
        "name": "Arbeitsmarkt 2026",
        "datePublished": row.created_at.astimezone(UTC).date().isoformat(),
        "publisher": {"@type": "Organization", "name": app.config["REPOSITORY_NAME"]},
        "inLanguage": "de",
        "version": 1,
        "description": "Ein Bericht.\nZweite Zeile.",
        "author": [
            {
                "@type": "Person",
                "name": "Muster, Erika",
                "familyName": "Muster",
                "givenName": "Erika",
            },
            {
                "@type": "Person",
                "name": "Beispiel, Max",
                "familyName": "Beispiel",
                "givenName": "Max",
            },
        ],
        "keywords": ["Arbeit", "Löhne", "Tarif"],
        "about": [{"@type": "Thing", "name": "Konjunktur"}],
        "encoding": {
            "@type": "MediaObject",
            "name": "bericht.pdf",
            "encodingFormat": "application/pdf",
            "contentSize": str(row.size),
            "sha256": row.checksum_sha256,
            "contentUrl": f"{BASE}/api/public/files/{report['id']}/download",
        },
    }


@pytest.mark.parametrize(
    ("name", "data", "schema_type"),
    [
        ("daten.csv", samples.csv_bytes(), "Dataset"),
        ("daten.xlsx", samples.xlsx_bytes(), "Dataset"),
        ("daten.json", samples.json_bytes(), "Dataset"),
        ("daten.zip", samples.zip_bytes(), "Dataset"),
        ("notiz.docx", samples.docx_bytes(), "CreativeWork"),
        ("folge.mp3", samples.mp3_bytes(), "PodcastEpisode"),
        ("film.mp4", samples.mp4_bytes(), "VideoObject"),
        ("bild.png", samples.png_bytes(), "ImageObject"),
    ],
)
def test_json_ld_has_the_type_that_fits_the_content(
    api: Api, app, alice: Account, name: str, data: bytes, schema_type: str
):
    record = api.create(alice, name, data, titel="Inhalt")
    row = api.row(record["id"])
    response = page(api, record["id"])
    item = json_ld(response)
    assert item["@type"] == schema_type
    content = {
        "encodingFormat": row.mime_type,
        "contentSize": str(row.size),
        "sha256": row.checksum_sha256,
        "contentUrl": f"{BASE}/api/public/files/{record['id']}/download",
    }
    if schema_type == "Dataset":
        assert item["distribution"] == [{"@type": "DataDownload", "name": name, **content}]
    elif schema_type == "CreativeWork":
        assert item["encoding"] == {"@type": "MediaObject", "name": name, **content}
    elif schema_type == "PodcastEpisode":
        assert item["associatedMedia"] == {"@type": "AudioObject", "name": name, **content}
        assert item["partOfSeries"] == {
            "@type": "PodcastSeries",
            "name": app.config["REPOSITORY_NAME"],
            "url": f"{BASE}/api/public/podcast.rss",
            "webFeed": f"{BASE}/api/public/podcast.rss",
        }
        podcast = api.client.get("/api/public/podcast.rss").get_data(as_text=True)
        assert content["contentUrl"] in podcast  # the episode the feed lists
    else:
        assert {key: item[key] for key in content} == content
        kind = schema_type.removesuffix("Object").lower()
        properties = open_graph(response)
        if kind in ("audio", "video"):
            assert properties[f"og:{kind}"] == [content["contentUrl"]]
            assert properties[f"og:{kind}:type"] == [row.mime_type]


HOSTILE_TITLE = "<script>alert(1)</script>"
HOSTILE_TEXT = "</script><script>alert(2)</script><!-- \" ' & <b>"


def test_any_metadata_shows_as_text_and_cannot_break_out(api: Api, alice: Account):
    record = api.create(
        alice,
        "bericht.pdf",
        titel=HOSTILE_TITLE,
        beschreibung=HOSTILE_TEXT,
        autoren=HOSTILE_TEXT,
        sachschlagwoerter="<i>x</i>",
    )
    response = page(api, record["id"])
    assert response.status_code == 200
    document = tree(response)
    assert document.xpath("string(//h1)") == HOSTILE_TITLE
    assert document.xpath("string(//div[@class='description'])").strip() == HOSTILE_TEXT
    assert not document.xpath("//b | //i[not(parent::p[@class='citation'])] | //body//script")
    (citation,) = document.xpath("//section[@class='cite']/p[@class='citation']")
    assert HOSTILE_TITLE in citation.text_content() and "alert(2)" in citation.text_content()
    assert [element.tag for element in citation.iter()] == ["p", "i"]  # the style's italics
    (script,) = document.xpath("//script")
    assert script.get("type") == "application/ld+json"
    item = json.loads(script.text)
    assert item["name"] == HOSTILE_TITLE and item["description"] == HOSTILE_TEXT
    assert json_ld(response) == item
    assert meta(document, "citation_title") == [HOSTILE_TITLE]


def test_pages_are_confined_to_their_own_assets(api: Api, report):
    response = page(api, report["id"])
    assert response.headers["Content-Security-Policy"].startswith("default-src 'self'")
    assert "unsafe-inline" not in response.headers["Content-Security-Policy"]
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    document = tree(response)
    assert not document.xpath("//*[@style] | //style | //script[not(@type)]")
    assets = document.xpath("//link[@rel='stylesheet']/@href | //*[@src]/@src")
    assert assets and all(a.startswith(("/", f"{BASE}/")) for a in assets)
    (stylesheet,) = document.xpath("//link[@rel='stylesheet']/@href")
    with api.client.get(stylesheet) as css:
        assert css.status_code == 200 and css.mimetype == "text/css"
        assert b"font-family" in css.get_data()


def test_pages_carry_an_etag_and_answer_304_until_the_record_changes(
    api: Api, alice: Account, report
):
    first = page(api, report["id"])
    etag = first.headers["ETag"]
    again = page(api, report["id"], headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.get_data() == b""
    assert again.headers["ETag"] == etag and again.headers["Cache-Control"] == PUBLIC_CACHE
    # A compressing proxy hands the client a weak tag: If-None-Match compares weakly.
    weak = page(api, report["id"], headers={"If-None-Match": f"W/{etag}"})
    assert weak.status_code == 304
    export = api.client.get(f"/records/{report['id']}/export/bibtex")
    weak_export = api.client.get(
        f"/records/{report['id']}/export/bibtex",
        headers={"If-None-Match": f"W/{export.headers['ETag']}"},
    )
    assert weak_export.status_code == 304
    assert api.patch(report["id"], alice, {"titel": "Neu"}).status_code == 200
    changed = page(api, report["id"], headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["ETag"] != etag
    assert tree(changed).xpath("string(//h1)") == "Neu"


def test_the_etag_changes_when_an_embargo_ends(api: Api, alice: Account):
    """The record is unchanged, but the page now offers the download."""
    record = api.create(alice, "bericht.pdf", sperrfrist=tomorrow())
    etag = page(api, record["id"]).headers["ETag"]
    api.set_columns(record["id"], sperrfrist=datetime.now(UTC).date())
    after = page(api, record["id"], headers={"If-None-Match": etag})
    assert after.status_code == 200 and after.headers["ETag"] != etag
    assert tree(after).xpath("//a[@class='download']")


def test_a_record_changed_by_sql_shows_its_new_values(api: Api, alice: Account):
    # Rendered from the row read at each view: no flush event needs to have seen the change.
    import uuid

    from sqlalchemy import update

    from app.extensions import db
    from app.models import FileRecord

    record = api.create(alice, "bericht.pdf", titel="Alt")
    assert tree(page(api, record["id"])).xpath("string(//h1)") == "Alt"
    with api.app.app_context():
        db.session.execute(
            update(FileRecord)
            .where(FileRecord.id == uuid.UUID(record["id"]))
            .values(titel="Neu per SQL")
        )
        db.session.commit()
    assert tree(page(api, record["id"])).xpath("string(//h1)") == "Neu per SQL"


def test_a_page_prints_the_oai_identifiers_of_the_configured_namespace(api: Api, alice):
    record = api.create(alice, "bericht.pdf", titel="Bericht")
    api.app.config["OAI_NAMESPACE"] = "repository.example"
    body = page(api, record["id"]).get_data()
    assert f"oai%3Arepository.example%3A{record['id']}".encode() in body


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(record_id=st.uuids(), path=st.one_of(st.none(), st.text()))
def test_a_pages_addresses_are_written_as_urlencode_writes_them(app, record_id, path):
    from app.pages import routes

    with app.app_context():
        urls = routes.page_urls(record_id, path, "https://r.example")
        identifier = f"oai:{app.config['OAI_NAMESPACE']}:{record_id}"
    oai = [("verb", "GetRecord"), ("metadataPrefix", "oai_dc"), ("identifier", identifier)]
    assert urls.oai_record == f"https://r.example/oai?{urlencode(oai)}"
    feed = "https://r.example/api/public/feed.atom"
    assert urls.folder_feed == (f"{feed}?{urlencode([('path', path)])}" if path else feed)
    assert urls.page == f"https://r.example/records/{record_id}"


def test_a_page_follows_the_mount_point_and_keeps_the_request_in_its_language_link(
    api: Api, alice: Account
):
    record = api.create(alice, "bericht.pdf", titel="Eingebunden")
    mounted = page(api, record["id"], base_url="http://localhost/repo/").get_data()
    assert b'href="/repo/static/pages/pages.css"' in mounted
    asked = page(api, record["id"], query_string={"utm_source": 'news"letter&x=<1>'})
    assert b'href="?utm_source=news%22letter%26x%3D%3C1%3E&amp;lang=en"' in asked.get_data()
