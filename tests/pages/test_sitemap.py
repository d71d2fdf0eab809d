"""`/sitemap.xml` names every public record page (and only those), valid against the
sitemaps.org schemas, switching to an index of parts above the limit, read in batches;
`/robots.txt` lets crawlers read the pages and the public data, not the protected API."""

from __future__ import annotations

import uuid
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
    """Parts are ranges of the id space: each lists the public records whose ids fall in its
    range, in id order, at most the limit; together they list every public record once."""
    monkeypatch.setattr(sitemap, "URLS_PER_SITEMAP", 4)
    monkeypatch.setattr(sitemap, "PART_FILL", 0.5)  # two records a part: ceil(5 / 2) = 3 parts
    index = parsed(api.client.get("/sitemap.xml"), "siteindex.xsd")
    parts = index.xpath("//s:sitemap/s:loc/text()", namespaces=NS)
    assert parts == [f"{BASE}/sitemap-{n}.xml" for n in (1, 2, 3)]
    every = expected(records, api)
    ids = sorted(uuid.UUID(r["id"]) for r in records)
    bounds = [0, 2**128 // 3, 2 * 2**128 // 3, 2**128]
    found: dict[str, str] = {}
    for number, part in enumerate(parts, start=1):
        inside = [i for i in ids if bounds[number - 1] <= i.int < bounds[number]][:4]
        response = api.client.get(part)
        if not inside:  # a sitemap lists at least one page; only a few records leave a gap
            assert response.status_code == 404 and response.mimetype == "text/html"
            continue
        document = parsed(response, "sitemap.xsd")
        urls = [url.findtext("s:loc", namespaces=NS) for url in document.iterfind("s:url", NS)]
        assert urls == [f"{BASE}/records/{i}" for i in inside]
        found.update(lastmods(document))
    assert found == {loc: every[loc] for loc in found}
    if all(sum(bounds[n] <= i.int < bounds[n + 1] for i in ids) <= 4 for n in range(3)):
        assert found == every
    for beyond in ("/sitemap-4.xml", "/sitemap-0.xml", "/sitemap-x.xml"):
        response = api.client.get(beyond)
        assert response.status_code == 404 and response.mimetype == "text/html", beyond


def test_a_part_is_found_by_its_id_range_not_by_counting_records_before_it(
    api: Api, app: Any, records, monkeypatch: pytest.MonkeyPatch
):
    """The last part of a million records costs what the first does: its reads start at its
    range in the primary key (an OFFSET would walk every record before it)."""
    monkeypatch.setattr(sitemap, "URLS_PER_SITEMAP", 1)
    statements: list[tuple[str, Any]] = []

    def seen(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        if "file_records" in statement:
            statements.append((statement, parameters))

    with app.app_context():
        engine = db.engine
    event.listen(engine, "before_cursor_execute", seen)
    try:
        api.client.get("/sitemap-5.xml")  # 200, or 404 if no id fell into its fifth
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    (read, parameters) = next((s, p) for s, p in statements if "ORDER BY file_records.id" in s)
    assert "file_records.id >=" in read and "file_records.id <" not in read  # the last part
    if "OFFSET" in read.upper():  # SQLite writes LIMIT ? OFFSET ? with an offset of 0
        assert list(parameters)[-1] == 0
    assert sitemap.part_ids(5, 5) == (uuid.UUID(int=4 * 2**128 // 5), None)
    assert sitemap.part_ids(1, 5) == (None, uuid.UUID(int=2**128 // 5))


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
