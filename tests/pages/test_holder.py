"""The holder's page of a share link (`/s/<secret>`): what the link opens, with downloads and
the ZIP, the embargo where a journalist cannot miss it, and nothing that could carry the
secret on (no cache, no index, no Referer, no log line)."""

from __future__ import annotations

import io
import json
import logging
import zipfile
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from lxml import html

from app.access_log import JSONFormatter
from tests.links.test_links import expire, kit, record_link, secret_of
from tests.support import samples
from tests.support.api import Account, Api

HOLDER_HEADERS = {
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "private, no-store",
    "X-Robots-Tag": "noindex",
}
#: Always ahead: next year's 1 December, so the texts below are known.
EMBARGO = date(datetime.now(UTC).year + 1, 12, 1)


def tree(response: Any) -> Any:
    return html.fromstring(response.get_data())


def holder_page(api: Api, link: dict[str, Any], **kwargs: Any) -> Any:
    assert link["url"].startswith("http://localhost/s/")
    return api.client.get(link["url"], **kwargs)


def assert_holder_headers(response: Any) -> None:
    for name, value in HOLDER_HEADERS.items():
        assert response.headers[name] == value, name
    assert "ETag" not in response.headers
    assert response.headers["Content-Security-Policy"].startswith("default-src 'self'")


@pytest.fixture
def embargoed(api: Api, alice: Account) -> dict[str, Any]:
    return api.create(
        alice,
        "bericht.pdf",
        titel="Arbeitsmarkt <b>2026</b>",
        autoren="Muster, Erika",
        sperrfrist=EMBARGO.isoformat(),
        freigabe=0,
        path="presse/2026-12",
    )


def test_a_record_links_page_shows_the_record_the_embargo_and_working_downloads(
    api: Api, alice: Account, embargoed
):
    link = record_link(api, alice, embargoed["id"]).get_json()
    response = holder_page(api, link)
    assert response.status_code == 200 and response.mimetype == "text/html"
    assert_holder_headers(response)
    document = tree(response)
    assert document.xpath("//meta[@name='robots']/@content") == ["noindex"]
    banner = document.xpath("string(//p[@class='embargo-banner'])")
    assert banner == f"Sperrfrist: nicht vor dem 1. Dezember {EMBARGO.year} veröffentlichen"
    assert document.xpath("string(//h1)") == "Arbeitsmarkt <b>2026</b>"  # escaped, as text
    assert b"<b>2026" not in response.get_data()
    secret = secret_of(link)
    (download,) = document.xpath("//article//a[@class='download']/@href")
    assert download == f"http://localhost/api/shared/{secret}/files/{embargoed['id']}/download"
    content = api.client.get(download)
    assert content.status_code == 200 and content.get_data() == samples.pdf_bytes()
    zip_url = document.xpath("//main/p/a[@class='download']/@href")[0]
    assert zip_url == f"http://localhost/api/shared/{secret}/files.zip"
    with zipfile.ZipFile(io.BytesIO(api.client.get(zip_url).get_data())) as archive:
        assert samples.pdf_bytes() in [archive.read(n) for n in archive.namelist()]
    # Not released: no public page to link to.
    assert not document.xpath("//a[contains(@href, '/records/')]")
    listed = api.get(f"/api/files/{embargoed['id']}/links", alice).get_json()["data"]
    assert listed[0]["downloads"] == 2 and listed[0]["last_used_at"] is not None


def test_the_embargo_in_english(api: Api, alice: Account, embargoed):
    link = record_link(api, alice, embargoed["id"]).get_json()
    for ask in ({"headers": {"Accept-Language": "en"}}, {"query_string": {"lang": "en"}}):
        document = tree(holder_page(api, link, **ask))
        banner = document.xpath("string(//p[@class='embargo-banner'])")
        assert banner == f"Embargo: do not publish before December 1, {EMBARGO.year}"


def test_a_press_kits_page_lists_its_records_and_pages_them(
    api: Api, alice: Account, bob: Account, embargoed, monkeypatch: pytest.MonkeyPatch
):
    from app.pages import holder

    monkeypatch.setattr(holder, "KIT_PAGE_SIZE", 2)
    data = api.create(alice, "daten.csv", b"a,b\n1,2\n", titel="Daten", path="presse/2026-12/x")
    audio = api.create(alice, "ton.mp3", samples.mp3_bytes(), titel="Ton", path="presse/2026-12")
    api.create(bob, "fremd.pdf", titel="Bobs", path="presse/2026-12")  # not alice's
    api.create(alice, "daneben.pdf", titel="Daneben", path="presse/2026-120")
    link = kit(api, alice, "presse/2026-12").get_json()
    response = holder_page(api, link)
    assert_holder_headers(response)
    seen: list[str] = []
    url: str | None = link["url"]
    while url:
        document = tree(api.client.get(url))
        seen += [h.text_content() for h in document.xpath("//article/h2")]
        more = document.xpath("//a[@rel='next']/@href")
        url = more[0] if more else None
    assert sorted(seen) == sorted(["Arbeitsmarkt <b>2026</b>", "Daten", "Ton"])
    first = tree(response)
    assert first.xpath("string(//h1)") == "Pressemappe: presse/2026-12"
    banners = first.xpath("//p[@class='embargo-banner']/text()")
    assert banners == [f"Sperrfrist: nicht vor dem 1. Dezember {EMBARGO.year} veröffentlichen"]
    hrefs = first.xpath("//article//a[@class='download']/@href")
    secret = secret_of(link)
    assert set(hrefs) <= {
        f"http://localhost/api/shared/{secret}/files/{r['id']}/download"
        for r in (embargoed, data, audio)
    }
    # A released record links its public page (no secret in that address).
    released = [a for a in first.xpath("//article//a[not(@class)]/@href")]
    assert all(secret not in href and "/records/" in href for href in released)
    assert sorted(href.rsplit("/", 1)[-1] for href in released) == sorted([data["id"], audio["id"]])


def test_unknown_revoked_and_expired_links(api: Api, alice: Account, embargoed):
    link = record_link(api, alice, embargoed["id"]).get_json()
    for url in ("/s/" + "A" * 43, "/s/kurz", "/s/" + "A" * 43 + "/x"):
        response = api.client.get(url)
        assert response.status_code == 404 and response.mimetype == "text/html", url
        assert_holder_headers(response)
    expire(api.app, link["id"])
    gone = holder_page(api, link)
    assert gone.status_code == 410 and gone.mimetype == "text/html"
    assert_holder_headers(gone)
    text = tree(gone).xpath("string(//main)")
    assert "abgelaufen" in text and str(datetime.now(UTC).year) in text
    english = holder_page(api, link, headers={"Accept-Language": "en"})
    assert "expired on" in tree(english).xpath("string(//main)")
    other = record_link(api, alice, embargoed["id"]).get_json()
    api.client.delete(f"/api/files/{embargoed['id']}/links/{other['id']}", headers=alice.auth)
    revoked = holder_page(api, other)
    assert revoked.status_code == 404 and revoked.mimetype == "text/html"
    assert secret_of(other) not in revoked.get_data(as_text=True)


def test_the_secret_never_reaches_the_log(
    api: Api, alice: Account, embargoed, caplog: pytest.LogCaptureFixture
):
    link = record_link(api, alice, embargoed["id"]).get_json()
    secret = secret_of(link)
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        api.client.get(f"/s/{secret}?lang=en", buffered=True)
        api.client.get(f"/s/{'B' * 43}", buffered=True)
    formatter = JSONFormatter()
    lines = [json.loads(formatter.format(r)) for r in caplog.records if r.name == "app.access"]
    assert [line["path"] for line in lines] == [f"/s/link:{link['id']}", "/s/link:unknown"]
    everything = "\n".join(formatter.format(r) for r in caplog.records)
    assert secret not in everything and "B" * 43 not in everything


def test_guessing_holder_pages_is_rate_limited(api: Api, make_sqlite_app: Any):
    app = make_sqlite_app(RATELIMIT_ENABLED=True, RATELIMIT_SHARE_LINK_FAILURES="3 per minute")
    client = app.test_client()
    statuses = [client.get("/s/" + f"{n:043d}").status_code for n in range(5)]
    assert statuses == [404, 404, 404, 429, 429]
    refused = client.get("/s/" + "0" * 43)
    assert refused.mimetype == "text/html" and "Retry-After" in refused.headers


def test_links_in_the_past_year_show_their_expiry(api: Api, alice: Account, embargoed):
    expires = (datetime.now(UTC) + timedelta(days=3)).replace(microsecond=0)
    link = record_link(
        api, alice, embargoed["id"], expires_at=expires.strftime("%Y-%m-%dT%H:%M:%SZ")
    ).get_json()
    text = tree(holder_page(api, link)).xpath("string(//p[@class='link-expiry'])")
    assert text.startswith("Dieser Link gilt bis") and str(expires.year) in text
