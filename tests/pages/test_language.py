"""The pages speak German unless the reader asks for English, by header or by the switch; the
dates follow the language, and a shared cache keeps the two apart."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po
from flask import current_app
from lxml import html

from app.pages import i18n
from app.pages.errors import is_page
from tests.links.test_links import kit, record_link, secret_of
from tests.support import samples
from tests.support.api import Account, Api

#: Page paths that answer a file (an export, the PDF preview), not a page in a language.
FILES = re.compile(r"/(export/[^/]+|preview)$")


def tree(response: Any) -> Any:
    return html.fromstring(response.get_data())


def embargoed_record(api: Api, alice: Account) -> dict[str, Any]:
    until = datetime.now(UTC).date() + timedelta(days=40)
    return api.create(alice, "bericht.pdf", sperrfrist=until.isoformat(), titel="Bericht")


def long_date(day: date, language: str) -> str:
    months = {
        "de": "Januar Februar März April Mai Juni Juli August September Oktober November Dezember",
        "en": "January February March April May June July August September October November "
        "December",
    }[language].split()
    if language == "de":
        return f"{day.day}. {months[day.month - 1]} {day.year}"
    return f"{months[day.month - 1]} {day.day}, {day.year}"


def test_german_is_the_default_with_german_dates(api: Api, alice: Account):
    record = embargoed_record(api, alice)
    response = api.client.get(f"/records/{record['id']}")
    document = tree(response)
    assert document.get("lang") == "de"
    until = date.fromisoformat(record["sperrfrist"])
    embargo = document.xpath("string(//p[@class='embargo'])")
    assert embargo.startswith(f"Sperrfrist bis {long_date(until, 'de')}: die Datei")
    assert "Accept-Language" in response.headers["Vary"]


@pytest.mark.parametrize(
    "ask",
    [
        {"headers": {"Accept-Language": "en-GB,en;q=0.9,de;q=0.5"}},
        {"query_string": {"lang": "en"}},
    ],
    ids=["accept-language", "switch"],
)
def test_english_by_header_or_switch(api: Api, alice: Account, ask: dict[str, Any]):
    record = embargoed_record(api, alice)
    response = api.client.get(f"/records/{record['id']}", **ask)
    document = tree(response)
    assert document.get("lang") == "en"
    until = date.fromisoformat(record["sperrfrist"])
    embargo = document.xpath("string(//p[@class='embargo'])")
    assert embargo.startswith(f"Embargoed until {long_date(until, 'en')}: the file")
    details = document.xpath("//dt/text()")
    assert details[:2] == ["File name", "Type"]
    assert document.xpath("//meta[@property='og:locale']/@content") == ["en_GB"]
    missing = api.client.get(f"/records/{'0' * 8}-0000-4000-8000-{'0' * 12}", **ask)
    assert missing.status_code == 404
    assert tree(missing).xpath("string(//h1)") == "Not found"


def test_the_switch_links_to_the_other_language_of_the_same_page(api: Api, alice: Account):
    record = embargoed_record(api, alice)
    document = tree(api.client.get(f"/records/{record['id']}"))
    (switch,) = document.xpath("//nav[@class='languages']")
    assert switch.xpath("a/@href") == ["?lang=en"]
    assert switch.xpath("span[@aria-current='true']/text()") == ["DE"]
    english = tree(api.client.get(f"/records/{record['id']}?lang=en"))
    assert english.xpath("//nav[@class='languages']/a/@href") == ["?lang=de"]


def test_a_language_chosen_by_the_address_carries_over_to_every_link_to_a_page(
    api: Api, alice: Account
):
    """`?lang=en` is kept by every link to a page (records, folders, search, front page, the
    next page of a list) and by every search form; links to files and feeds have no language,
    and the switch names its own."""
    record = api.create(alice, "bericht.pdf", titel="Bericht", path="berichte/2026/q1")
    api.create(alice, "anhang.pdf", titel="Anhang", path="berichte")
    secret = secret_of(record_link(api, alice, record["id"]).get_json())
    addresses = [
        "/",
        "/browse/",
        "/browse/berichte",
        f"/records/{record['id']}",
        "/search?q=Bericht",
        f"/s/{secret}",
    ]
    for address in addresses:
        joined = "&" if "?" in address else "?"
        document = tree(api.client.get(f"{address}{joined}lang=en"))
        assert document.get("lang") == "en", address
        page_links = [
            href
            for href in document.xpath("//body//a[not(ancestor::nav[@class='languages'])]/@href")
            if is_page(urlsplit(href).path) and not FILES.search(urlsplit(href).path)
        ]
        assert page_links, address
        for href in page_links:
            assert parse_qs(urlsplit(href).query).get("lang") == ["en"], (address, href)
            follow = tree(api.client.get(href))
            assert follow.get("lang") == "en", (address, href)
        for form in document.xpath("//form[@method='get']"):
            assert form.xpath("input[@type='hidden'][@name='lang']/@value") == ["en"], address
    # Chosen by the header instead, the links stay as they were.
    document = tree(api.client.get("/browse/berichte", headers={"Accept-Language": "en"}))
    assert all("lang=" not in href for href in document.xpath("//main//a/@href"))
    assert document.xpath("//input[@name='lang']") == []


def test_each_language_has_its_own_etag(api: Api, alice: Account):
    record = embargoed_record(api, alice)
    german = api.client.get(f"/records/{record['id']}")
    english = api.client.get(f"/records/{record['id']}", headers={"Accept-Language": "en"})
    assert german.headers["ETag"] != english.headers["ETag"]
    again = api.client.get(
        f"/records/{record['id']}",
        headers={"Accept-Language": "en", "If-None-Match": german.headers["ETag"]},
    )
    assert again.status_code == 200 and tree(again).get("lang") == "en"


def test_every_source_string_has_its_english_translation():
    for language in i18n.LANGUAGES:
        if language == i18n.DEFAULT:
            continue
        path = i18n.CATALOGUES / language / "LC_MESSAGES" / "messages.po"
        with path.open("rb") as po:
            catalogue = read_po(po, locale=language)
        untranslated = [
            message.id
            for message in catalogue
            if message.id
            and not (message.string if isinstance(message.string, str) else all(message.string))
        ]
        assert untranslated == []
        assert not [message.id for message in catalogue if message.fuzzy and message.id]


def test_the_catalogue_holds_every_string_the_pages_use():
    """A string added to a template or a page module without `pybabel update` fails here."""
    root = i18n.CATALOGUES.parent.parent
    method_map = [("app/pages/**.py", "python"), ("app/pages/templates/**.html", "jinja2")]
    used = {message for _, _, message, *_ in extract_from_dir(root, method_map)}
    used = {message if isinstance(message, str) else message[0] for message in used}
    path = i18n.CATALOGUES / "en" / "LC_MESSAGES" / "messages.po"
    with path.open("rb") as po:
        known = {
            message.id if isinstance(message.id, str) else message.id[0]
            for message in read_po(po, locale="en")
            if message.id
        }
    assert used - known == set()


def test_pages_compiled_in_each_language_print_what_gettext_prints(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    """The templates' constant strings are translated once, when a template is compiled
    (`i18n.TranslatedConstants`): every kind of page, in both languages, is byte for byte the
    page that translating each string while rendering gives."""
    folder = {"path": "presse/2026", "autoren": "Muster, Erika", "sachschlagwoerter": "a; b"}
    records = [
        api.create(alice, "bericht.pdf", titel="Bericht 100 % <b>fett</b>", **folder),
        api.create(alice, "daten.csv", samples.csv_bytes(), **folder),
        api.create(alice, "folge.mp3", samples.mp3_bytes(), **folder),
        api.create(alice, "film.mp4", samples.mp4_bytes(), **folder),
        api.create(alice, "bild.png", samples.png_bytes(), **folder),
        embargoed_record(api, alice),
    ]
    links = [
        record_link(api, alice, records[-1]["id"]).get_json()["url"],
        kit(api, alice, "presse").get_json()["url"],
    ]
    paths = [
        *(f"/records/{record['id']}" for record in records),
        f"/records/{'0' * 8}-0000-4000-8000-{'0' * 12}",
        "/",
        "/?lang=en",
        "/browse/",
        "/browse/presse/2026",
        "/search?q=Bericht",
        "/search?q=",
        *links,
    ]

    def pages() -> dict[tuple[str, str], tuple[int, bytes]]:
        answers = {}
        for path in paths:
            for language in i18n.LANGUAGES:
                response = api.client.get(path, headers={"Accept-Language": language})
                answers[path, language] = (response.status_code, response.get_data())
        return answers

    compiled = pages()
    assert {status for status, _ in compiled.values()} >= {200, 404}
    monkeypatch.setattr(i18n, "page_templates", lambda: current_app.jinja_env)
    assert pages() == compiled


def test_constant_strings_leave_no_call_in_the_compiled_template(app: Any):
    """What the test above compares is two mechanisms: the page's templates hold their
    constant strings as text in the page's language; a string with values stays a call."""
    call = "'Herunterladen', _block_vars"
    for language, text in (("de", "download>Herunterladen ("), ("en", "download>Download (")):
        with app.test_request_context(headers={"Accept-Language": language}):
            environment = i18n.page_templates()
            source = environment.loader.get_source(environment, "pages/record.html")[0]
            translated = environment.compile(source, "pages/record.html", raw=True)
            runtime = app.jinja_env.compile(source, "pages/record.html", raw=True)
        assert call in runtime and call not in translated
        assert text in translated
        assert "'Vorschau: %(title)s'" in translated
