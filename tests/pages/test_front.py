"""The front page (`/`): the newest releases the public may download now, the search box, the
top folders and the feeds, in German and English; the API and other addresses as before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from lxml import html

from app.files import access
from tests.support.api import Account, Api

BASE = "http://localhost"
PUBLIC_CACHE = "public, max-age=0, must-revalidate"


def tree(response: Any) -> Any:
    return html.fromstring(response.get_data())


def newest(document: Any) -> list[str]:
    return [a.text_content() for a in document.xpath("//ol[@class='records']/li/a")]


def later(days: int) -> str:
    return (datetime.now(UTC).date() + timedelta(days=days)).isoformat()


def test_the_front_page_shows_what_the_public_may_download_now(
    api: Api, alice: Account, bob: Account
):
    old = api.create(alice, "alt.pdf", titel="Alt", path="berichte/2026")
    api.create(alice, "neu.pdf", titel="Neu", path="presse")
    api.create(alice, "entwurf.pdf", titel="Entwurf", path="geheim", freigabe=0)
    api.create(bob, "gesperrt.pdf", titel="Gesperrt", path="presse", sperrfrist=later(5))
    ended = api.create(alice, "frei.pdf", titel="Heute frei", sperrfrist=later(0))
    api.set_columns(old["id"], created_at=datetime(2024, 1, 1, tzinfo=UTC))
    api.set_columns(ended["id"], created_at=datetime(2023, 1, 1, tzinfo=UTC))
    response = api.client.get("/")
    assert response.status_code == 200 and response.mimetype == "text/html"
    document = tree(response)
    assert document.get("lang") == "de"
    # Newest release first; an embargo that ends today released the record at today's start.
    assert newest(document) == ["Neu", "Heute frei", "Alt"]
    links = document.xpath("//ol[@class='records']/li/a/@href")
    assert links[-1] == f"{BASE}/records/{old['id']}"
    assert all(api.client.get(link).status_code == 200 for link in links)
    # The top folders as /browse/ lists them: only folders of released records.
    assert document.xpath("//ul[@class='folders']/li/a/text()") == ["berichte", "presse"]
    assert document.xpath("//ul[@class='folders']/li/a/@href")[0] == f"{BASE}/browse/berichte"
    assert f"{BASE}/browse/" in document.xpath("//a/@href")
    # The search box, answered by the search page: the header's, the one on every page.
    (form,) = document.xpath("//form[@role='search']")
    assert form.xpath("ancestor::header")
    assert form.get("action") == "/search" and form.xpath(".//input[@name='q']")
    assert "Neu" in api.client.get("/search", query_string={"q": "Neu"}).get_data(as_text=True)
    # The feeds, linked and announced.
    feeds = document.xpath("//link[@rel='alternate']")
    assert [(f.get("type"), f.get("href")) for f in feeds] == [
        ("application/atom+xml", f"{BASE}/api/public/feed.atom"),
        ("application/rss+xml", f"{BASE}/api/public/podcast.rss"),
    ]
    for href in document.xpath("//ul[@class='feeds']/li/a/@href"):
        assert api.client.get(href).status_code == 200
    assert "Neueste Veröffentlichungen" in document.text_content()


@pytest.mark.parametrize(
    "ask", [{"query_string": {"lang": "en"}}, {"headers": {"Accept-Language": "en-GB,en"}}]
)
def test_the_front_page_in_english(api: Api, alice: Account, ask: dict[str, Any]):
    api.create(alice, "a.pdf", titel="Bericht", path="berichte")
    document = tree(api.client.get("/", **ask))
    assert document.get("lang") == "en"
    text = document.text_content()
    assert "Newest publications" in text and "Subscribe" in text
    assert "Neueste" not in text and "Abonnieren" not in text
    assert newest(document) == ["Bericht"]


def test_an_empty_repository_has_a_front_page_that_says_so(api: Api):
    document = tree(api.client.get("/"))
    assert newest(document) == [] and document.xpath("//ul[@class='folders']") == []
    assert "Noch ist keine Veröffentlichung frei zugänglich." in document.text_content()


def test_the_front_page_shows_the_newest_few(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr("app.pages.front.NEWEST", 2)
    for title in ("Eins", "Zwei", "Drei"):
        api.create(alice, f"{title}.pdf", titel=title)
    assert newest(tree(api.client.get("/"))) == ["Drei", "Zwei"]


def test_an_embargo_that_ends_puts_the_record_on_the_front_page(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    api.create(alice, "x.pdf", titel="Später", sperrfrist=later(1))
    assert newest(tree(api.client.get("/"))) == []
    tomorrow = datetime.now(UTC).date() + timedelta(days=1)
    monkeypatch.setattr(access, "today", lambda: tomorrow)
    assert newest(tree(api.client.get("/"))) == ["Später"]


def test_the_front_page_is_cacheable_revalidated_and_answers_head(api: Api, alice: Account):
    api.create(alice, "a.pdf", titel="Eins")
    first = api.client.get("/")
    assert first.headers["Cache-Control"] == PUBLIC_CACHE
    assert "Accept-Language" in first.headers["Vary"]
    assert first.headers["Content-Security-Policy"].startswith("default-src 'self'")
    etag = first.headers["ETag"]
    assert api.client.get("/", headers={"If-None-Match": etag}).status_code == 304
    assert api.client.get("/?lang=en").headers["ETag"] != etag
    head = api.client.head("/")
    assert head.status_code == 200 and head.data == b"" and head.headers["ETag"] == etag
    api.create(alice, "b.pdf", titel="Zwei")
    assert api.client.get("/", headers={"If-None-Match": etag}).status_code == 200


def test_the_api_and_unknown_addresses_answer_as_before(api: Api, alice: Account):
    record = api.create(alice, "a.pdf", titel="Eins")
    listed = api.client.get("/api/public/files")
    assert listed.status_code == 200 and listed.mimetype == "application/json"
    assert [item["id"] for item in listed.get_json()["data"]] == [record["id"]]
    for path in ("/no-such-page", "/api/no-such-thing", "/index.html"):
        missing = api.client.get(path)
        assert missing.status_code == 404 and missing.mimetype == "application/json", path
        assert missing.get_json() == {"message": "Not found."}
    refused = api.client.post("/")
    assert refused.status_code == 405 and refused.mimetype == "text/html"
