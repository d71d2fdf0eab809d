"""`/sitemap.xml` names every public record page (and only those), valid against the
sitemaps.org schemas, switching to an index of parts above the limit, read in batches;
`/robots.txt` lets crawlers read the pages and the public data, not the protected API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from lxml import etree
from sqlalchemy import event

from app.extensions import db
from app.pages import sitemap
from tests.support.api import Account, Api

HERE = Path(__file__).parent
NS = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9"}
BASE = "http://localhost"


def schema(name: str) -> etree.XMLSchema:
    return etree.XMLSchema(etree.parse(str(HERE / name)))


def parsed(response: Any, xsd: str) -> Any:
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/xml; charset=utf-8"
    document = etree.fromstring(response.get_data())
    schema(xsd).assertValid(document)
    return document


def lastmods(document: Any) -> dict[str, str]:
    return {
        url.findtext("s:loc", namespaces=NS): url.findtext("s:lastmod", namespaces=NS)
        for url in document.iterfind("s:url", NS)
    }


@pytest.fixture
def records(api: Api, alice: Account, bob: Account) -> list[dict[str, Any]]:
    later = (datetime.now(UTC).date() + timedelta(days=3)).isoformat()
    public = [api.create(alice, f"{n}.pdf", titel=f"R{n}") for n in range(4)]
    public.append(api.create(bob, "e.pdf", sperrfrist=later))  # embargoed pages exist too
    api.create(alice, "u.pdf", freigabe=0)
    api.create(bob, "v.pdf", freigabe=0)
    return public


def expected(records: list[dict[str, Any]], api: Api) -> dict[str, str]:
    return {
        f"{BASE}/records/{r['id']}": api.row(r["id"])
        .updated_at.astimezone(UTC)
        .isoformat(timespec="seconds")
        for r in records
    }


def test_the_sitemap_names_every_public_record_page_with_its_lastmod(api: Api, records):
    api.patch(records[0]["id"], api.account("admin@example.org", admin=True), {"titel": "Neu"})
    document = parsed(api.client.get("/sitemap.xml"), "sitemap.xsd")
    assert lastmods(document) == expected(records, api)
    for loc in lastmods(document):
        assert api.client.get(loc).status_code == 200


def test_above_the_limit_the_sitemap_is_an_index_of_parts(
    api: Api, records, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(sitemap, "URLS_PER_SITEMAP", 2)
    index = parsed(api.client.get("/sitemap.xml"), "siteindex.xsd")
    parts = index.xpath("//s:sitemap/s:loc/text()", namespaces=NS)
    assert parts == [f"{BASE}/sitemap-{n}.xml" for n in (1, 2, 3)]
    found: dict[str, str] = {}
    for part in parts:
        urls = lastmods(parsed(api.client.get(part), "sitemap.xsd"))
        assert 1 <= len(urls) <= 2 and not set(urls) & set(found)
        found.update(urls)
    assert found == expected(records, api)
    for beyond in ("/sitemap-4.xml", "/sitemap-0.xml", "/sitemap-x.xml"):
        response = api.client.get(beyond)
        assert response.status_code == 404 and response.mimetype == "text/html", beyond


def test_the_sitemap_streams_reading_records_in_batches(
    api: Api, app: Any, records, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(sitemap, "BATCH", 2)
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "file_records" in statement:
            statements.append(statement)

    with app.app_context():
        engine = db.engine
    event.listen(engine, "before_cursor_execute", seen)
    try:
        response = api.client.get("/sitemap.xml", buffered=False)
        assert response.is_streamed
        chunks = [chunk for chunk in response.response if chunk]
        response.close()
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    # Five public records, two a query: three reads (the last one short), each of a batch.
    reads = [s for s in statements if "ORDER BY file_records.id" in s]
    assert len(reads) == 3
    assert len(chunks) >= 3  # a chunk per batch, not one body built at the end
    document = etree.fromstring(b"".join(chunks))
    assert len(lastmods(document)) == 5


def test_robots_txt_lets_crawlers_read_pages_and_public_data_not_the_api(api: Api):
    response = api.client.get("/robots.txt")
    assert response.status_code == 200 and response.mimetype == "text/plain"
    lines = response.get_data(as_text=True).splitlines()
    assert lines[:5] == [
        "User-agent: *",
        "Allow: /api/public/",
        "Disallow: /api/",
        "Disallow: /search",
        "Allow: /",
    ]
    assert f"Sitemap: {BASE}/sitemap.xml" in lines
    from urllib.robotparser import RobotFileParser

    robots = RobotFileParser()
    robots.parse(lines)
    assert robots.can_fetch("Googlebot", f"{BASE}/records/x")
    assert robots.can_fetch("Googlebot", f"{BASE}/browse/a")
    assert robots.can_fetch("Googlebot", f"{BASE}/api/public/files/x/download")
    assert not robots.can_fetch("Googlebot", f"{BASE}/api/files")
    assert not robots.can_fetch("Googlebot", f"{BASE}/api/shared/x")
    assert not robots.can_fetch("Googlebot", f"{BASE}/search?q=x")
    assert robots.site_maps() == [f"{BASE}/sitemap.xml"]
