"""Finding things without knowing an id: folder pages and the search page show what the
public API shows (released records, newest or best first), a page at a time, escaped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from lxml import html

from app.pages import browse
from tests.support.api import Account, Api

BASE = "http://localhost"


def tree(response: Any) -> Any:
    return html.fromstring(response.get_data())


def titles(document: Any) -> list[str]:
    return [a.text_content() for a in document.xpath("//ol[@class='records']/li/a")]


def folders(document: Any) -> list[str]:
    return document.xpath("//ul[@class='folders']/li/a/text()")


def later(days: int) -> str:
    return (datetime.now(UTC).date() + timedelta(days=days)).isoformat()


def test_a_folder_page_shows_its_sub_folders_and_its_released_records_newest_first(
    api: Api, alice: Account, bob: Account
):
    api.create(alice, "a.pdf", titel="Alt", path="berichte")
    api.create(alice, "b.pdf", titel="Neu", path="berichte")
    api.create(alice, "c.pdf", titel="Unfertig", path="berichte", freigabe=0)
    api.create(bob, "d.pdf", titel="Bobs Entwurf", path="berichte/entwurf", freigabe=0)
    api.create(alice, "e.pdf", titel="Quartal", path="berichte/2026/q1")
    api.create(alice, "f.pdf", titel="Tiefer", path="berichte/2026/q1/x")
    api.create(alice, "g.pdf", titel="Daneben", path="berichte-alt")
    embargoed = api.create(alice, "h.pdf", titel="Gesperrt", path="berichte", sperrfrist=later(9))
    response = api.client.get("/browse/berichte")
    assert response.status_code == 200 and response.mimetype == "text/html"
    document = tree(response)
    assert titles(document) == ["Gesperrt", "Neu", "Alt"]
    # Sub-folders only from released records: no "entwurf"; "berichte-alt" is no child.
    assert folders(document) == ["2026"]
    assert document.xpath("//ul[@class='folders']/li/a/@href") == [f"{BASE}/browse/berichte/2026"]
    links = document.xpath("//ol[@class='records']/li/a/@href")
    assert links[0] == f"{BASE}/records/{embargoed['id']}"
    assert "Sperrfrist bis" in document.xpath("string(//ol[@class='records']/li[1])")
    assert api.client.get(links[0]).status_code == 200
    crumbs = document.xpath("//ol[@class='breadcrumbs']/li")
    assert [li.text_content() for li in crumbs] == ["Alle Ordner", "berichte"]
    feeds = document.xpath("//link[@rel='alternate']")
    assert [(f.get("type"), f.get("href")) for f in feeds] == [
        ("application/atom+xml", f"{BASE}/api/public/feed.atom?path=berichte%2F")
    ]
    assert response.headers["Content-Security-Policy"].startswith("default-src 'self'")
    deep = tree(api.client.get("/browse/berichte/2026"))
    assert folders(deep) == ["q1"] and titles(deep) == []
    crumbs = deep.xpath("//ol[@class='breadcrumbs']/li/a/@href")
    assert crumbs == [f"{BASE}/browse/", f"{BASE}/browse/berichte"]
    top = tree(api.client.get("/browse/"))
    assert folders(top) == ["berichte", "berichte-alt"]


def test_a_folder_page_offers_the_podcast_feed_when_it_holds_media(api: Api, alice: Account):
    from tests.support import samples

    api.create(alice, "folge.mp3", samples.mp3_bytes(), titel="Folge 1", path="podcast")
    document = tree(api.client.get("/browse/podcast"))
    types = document.xpath("//link[@rel='alternate']/@type")
    assert types == ["application/atom+xml", "application/rss+xml"]
    podcast = document.xpath("//link[@type='application/rss+xml']/@href")[0]
    assert api.client.get(podcast).status_code == 200


def test_unknown_unreleased_and_malformed_folders_are_html_404(api: Api, alice: Account):
    api.create(alice, "x.pdf", path="geheim/entwurf", freigabe=0)
    for path in (
        "/browse/geheim",
        "/browse/gibt-es-nicht",
        "/browse/<script>alert(1)</script>",
        "/browse/a//b",
        "/browse/../etc",
    ):
        response = api.client.get(path)
        assert response.status_code == 404, path
        assert response.mimetype == "text/html"
        assert b"<script>" not in response.get_data()
        assert response.headers["Content-Security-Policy"].startswith("default-src 'self'")
        # It speaks of a folder, not of a file.
        assert tree(response).xpath("string(//main/p)") == (
            "Unter dieser Adresse ist kein Ordner mit veröffentlichten Dateien zu finden."
        )
    english = api.client.get("/browse/gibt-es-nicht?lang=en")
    assert tree(english).xpath("string(//main/p)") == (
        "There is no folder with published files at this address."
    )


def test_a_bad_cursor_is_an_html_400(api: Api, alice: Account):
    api.create(alice, "x.pdf", path="a")
    for query in ("cursor=%%%", "cursor=bm9wZQ", "folders_after=%3Cscript%3E"):
        response = api.client.get(f"/browse/a?{query}")
        assert response.status_code == 400, query
        assert response.mimetype == "text/html"
        assert b"<script>" not in response.get_data()


def test_folders_and_records_page_with_cursor_links(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(browse, "PAGE_SIZE", 2)
    names = ["a", "a-b", "a.c", "a0", "b", "ba"]
    for name in names:
        api.create(alice, f"{name}.pdf", path=f"top/{name}/deeper")
        api.create(alice, f"{name}2.pdf", path=f"top/{name}")
    for number in range(5):
        api.create(alice, f"r{number}.pdf", titel=f"R{number}", path="top")
    seen: list[str] = []
    url: str | None = "/browse/top"
    while url:
        document = tree(api.client.get(url))
        seen += folders(document)
        more = document.xpath("//a[text()='Weitere Ordner']/@href")
        url = more[0] if more else None
    assert seen == sorted(names)
    seen = []
    url = "/browse/top"
    while url:
        document = tree(api.client.get(url))
        seen += titles(document)
        older = document.xpath("//a[text()='Ältere']/@href")
        url = older[0] if older else None
    assert seen == ["R4", "R3", "R2", "R1", "R0"]


def test_hostile_titles_show_as_text(api: Api, alice: Account):
    title = "<script>alert(1)</script> Bericht"
    api.create(alice, "x.pdf", titel=title, path="a")
    response = api.client.get("/browse/a")
    assert b"<script>alert" not in response.get_data()
    assert titles(tree(response)) == [title]
    found = api.client.get("/search", query_string={"q": "bericht"})
    assert b"<script>alert" not in found.get_data()
    public = api.client.get("/api/public/files", query_string={"q": "bericht"}).get_json()
    assert titles(tree(found)) == [record["titel"] for record in public["data"]]
    assert tree(found).xpath("//title/text()")[0].startswith("Suche: bericht")
    hostile = api.client.get("/search", query_string={"q": "<script>x</script>"})
    assert b"<script>x" not in hostile.get_data()


def test_search_finds_what_the_public_search_finds_in_the_same_order(
    api: Api, alice: Account, bob: Account
):
    api.create(alice, "a.pdf", titel="Arbeitsmarkt", beschreibung="Löhne")
    api.create(alice, "b.pdf", titel="Löhne und Arbeitsmarkt im Arbeitsmarkt")
    api.create(alice, "c.pdf", titel="Arbeitsmarkt intern", freigabe=0)
    api.create(bob, "d.pdf", titel="Arbeitsmarkt Entwurf", freigabe=0)
    api.create(bob, "e.pdf", titel="Arbeitsmarkt gesperrt", sperrfrist=later(5))
    public = api.client.get("/api/public/files", query_string={"q": "arbeitsmarkt"}).get_json()
    expected = [record["titel"] for record in public["data"]]
    assert len(expected) == 3
    response = api.client.get("/search", query_string={"q": "arbeitsmarkt"})
    assert response.status_code == 200
    document = tree(response)
    assert titles(document) == expected
    assert document.xpath("//input[@id='q-main']/@value") == ["arbeitsmarkt"]
    assert "Treffer: 3" in document.xpath("string(//p[@class='count'])")


def test_search_pages(api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(browse, "PAGE_SIZE", 2)
    for number in range(5):
        api.create(alice, f"{number}.pdf", titel=f"Bericht {number}")
    seen: list[str] = []
    url: str | None = "/search?q=bericht"
    while url:
        document = tree(api.client.get(url))
        seen += titles(document)
        more = document.xpath("//a[@rel='next']/@href")
        url = more[0] if more else None
    assert sorted(seen) == [f"Bericht {n}" for n in range(5)] and len(seen) == 5


def test_search_without_a_query_shows_the_form_and_says_what_is_wrong(api: Api):
    empty = api.client.get("/search")
    assert empty.status_code == 200
    assert tree(empty).xpath("//form[@action='/search']/input[@name='q']")
    blank = api.client.get("/search?q=++")
    assert blank.status_code == 200
    assert tree(blank).xpath("string(//p[@class='message'])") == "Bitte einen Suchbegriff eingeben."
    for query in ('q="offen', "q=x&page=0", "q=x&page=abc", "q=x&page=100000"):
        bad = api.client.get(f"/search?{query}")
        assert bad.status_code == 400, query
        assert bad.mimetype == "text/html"
        assert tree(bad).xpath("//p[@class='message']"), query
        assert tree(bad).xpath("//input[@id='q-main']")


def test_every_page_has_the_search_form_in_its_header(api: Api, alice: Account):
    record = api.create(alice, "x.pdf", path="a")
    for path in (f"/records/{record['id']}", "/browse/", "/browse/a", "/search", "/browse/zz"):
        document = tree(api.client.get(path))
        (form,) = document.xpath("//header//form")
        assert form.get("method") == "get" and form.get("action") == "/search"
        assert form.xpath("input[@name='q']")


def test_the_language_switch_keeps_the_search(api: Api):
    document = tree(api.client.get("/search?q=bericht"))
    assert document.xpath("//nav[@class='languages']/a/@href") == ["?q=bericht&lang=en"]
