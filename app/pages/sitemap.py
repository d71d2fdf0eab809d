"""`/sitemap.xml` and `/robots.txt`: where crawlers find the record pages.

The sitemap names the page of every record the public may read, with `lastmod` from
`updated_at`. Above `URLS_PER_SITEMAP` pages it is a sitemap index of `/sitemap-<n>.xml` parts
(the sitemaps.org limit). Each answer is streamed: records are read in keyset batches and
written with lxml's incremental writer, so memory does not grow with the number of records.

A part is a range of record ids, not a place in their order: part n of K holds the ids from
(n-1)/K to n/K of the id space, so finding its start costs one index lookup whatever n is (an
OFFSET into a million ids took half a second). Record ids are random (UUID 4, made by the app),
so with K chosen for `PART_FILL` records a part, a part's share is within a few hundred of it;
a part never lists more than `URLS_PER_SITEMAP`.
"""

from __future__ import annotations

import io
import itertools
import math
import uuid
from collections.abc import Iterator
from datetime import UTC
from typing import Any

from flask import Response, request, stream_with_context
from lxml import etree
from sqlalchemy import func, select

from app.exceptions import RecordNotFound
from app.extensions import db
from app.files import access
from app.http import external_url
from app.models import FilePathCount, FileRecord
from app.pages.blueprint import bp

NAMESPACE = "http://www.sitemaps.org/schemas/sitemap/0.9"
#: The most URLs one sitemap file may hold (sitemaps.org); read at each request.
URLS_PER_SITEMAP = 50_000
#: Records a part holds on average: far enough under the limit that random ids never reach it
#: (a part's count varies by about the square root of this).
PART_FILL = 0.8
#: Records read per query while a sitemap streams.
BATCH = 1_000
XML = "application/xml; charset=utf-8"


def released_count() -> int:
    """How many records the public may read, from the folder counts (a few rows)."""
    counts = FilePathCount
    total = db.session.scalar(
        select(func.coalesce(func.sum(counts.n), 0)).where(counts.freigabe.is_(True))
    )
    return int(total or 0)


def _batches(ids: tuple[uuid.UUID | None, uuid.UUID | None], limit: int) -> Iterator[list[Any]]:
    """The public records with ids in [low, high) (None: unbounded), in id order, `limit` at
    most, BATCH at a time."""
    low, high = ids
    query = select(FileRecord.id, FileRecord.updated_at).where(access.visible(None))
    if high is not None:
        query = query.where(FileRecord.id < high)
    after: uuid.UUID | None = None
    left = limit
    while left > 0:
        page = query
        if after is not None:
            page = page.where(FileRecord.id > after)
        elif low is not None:
            page = page.where(FileRecord.id >= low)
        asked = min(BATCH, left)
        rows = list(db.session.execute(page.order_by(FileRecord.id).limit(asked)))
        if rows:
            yield rows
        if len(rows) < asked:
            return
        left -= len(rows)
        after = rows[-1].id


#: Every record id is below this (128 bits).
_ID_SPACE = 1 << 128


def part_count(total: int) -> int:
    """How many parts `total` public records make: one up to the limit, else enough for
    `PART_FILL` of the limit each."""
    if total <= URLS_PER_SITEMAP:
        return 1
    return math.ceil(total / max(1, int(URLS_PER_SITEMAP * PART_FILL)))


def part_ids(number: int, parts: int) -> tuple[uuid.UUID | None, uuid.UUID | None]:
    """The ids of part `number` (1..parts): [low, high), None where the range is open."""
    low = None if number == 1 else uuid.UUID(int=(number - 1) * _ID_SPACE // parts)
    high = None if number == parts else uuid.UUID(int=number * _ID_SPACE // parts)
    return low, high


def _drain(buffer: io.BytesIO) -> bytes:
    data = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return data


def _element(xf: Any, name: str, text: str) -> None:
    with xf.element(f"{{{NAMESPACE}}}{name}"):
        xf.write(text)


def _urlset(batches: Iterator[list[Any]]) -> Iterator[bytes]:
    buffer = io.BytesIO()
    pages = external_url(f"{request.script_root}/records/")
    with etree.xmlfile(buffer, encoding="utf-8") as xf:
        xf.write_declaration()
        with xf.element(f"{{{NAMESPACE}}}urlset", nsmap={None: NAMESPACE}):
            for rows in batches:
                for row in rows:
                    with xf.element(f"{{{NAMESPACE}}}url"):
                        _element(xf, "loc", f"{pages}{row.id}")
                        lastmod = row.updated_at.astimezone(UTC).isoformat(timespec="seconds")
                        _element(xf, "lastmod", lastmod)
                xf.flush()
                yield _drain(buffer)
    yield _drain(buffer)


def _index(parts: int) -> Iterator[bytes]:
    buffer = io.BytesIO()
    with etree.xmlfile(buffer, encoding="utf-8") as xf:
        xf.write_declaration()
        with xf.element(f"{{{NAMESPACE}}}sitemapindex", nsmap={None: NAMESPACE}):
            for number in range(1, parts + 1):
                with xf.element(f"{{{NAMESPACE}}}sitemap"):
                    _element(xf, "loc", external_url(f"{request.script_root}/sitemap-{number}.xml"))
                if number % BATCH == 0:
                    xf.flush()
                    yield _drain(buffer)
    yield _drain(buffer)


def _streamed(chunks: Iterator[bytes]) -> Response:
    return Response(stream_with_context(chunks), content_type=XML)


@bp.get("/sitemap.xml")
def sitemap() -> Response:
    """Every public record page, or above URLS_PER_SITEMAP the index of the parts."""
    parts = part_count(released_count())
    if parts > 1:
        return _streamed(_index(parts))
    return _streamed(_urlset(_batches((None, None), URLS_PER_SITEMAP)))


@bp.get("/sitemap-<int:number>.xml")
def sitemap_part(number: int) -> Response:
    """Part `number` of the sitemap: the public records whose ids fall in its range; 404 when
    there are none (a sitemap lists at least one page), which only a few records allow."""
    parts = part_count(released_count())
    if not 1 <= number <= parts:
        raise RecordNotFound()
    batches = _batches(part_ids(number, parts), URLS_PER_SITEMAP)
    first = next(batches, None)
    if first is None:
        raise RecordNotFound()
    return _streamed(_urlset(itertools.chain([first], batches)))


@bp.get("/robots.txt")
def robots() -> Response:
    """Crawlers read the pages; of the API only the public part, whose downloads the pages
    name (Google Scholar fetches `citation_pdf_url`); not the search result pages."""
    lines = [
        "User-agent: *",
        # Most specific first: first-match readers and longest-match ones (Google) agree.
        "Allow: /api/public/",
        "Disallow: /api/",
        "Disallow: /search",
        "Allow: /",
        "",
        f"Sitemap: {external_url(f'{request.script_root}/sitemap.xml')}",
        "",
    ]
    return Response("\n".join(lines), content_type="text/plain; charset=utf-8")
