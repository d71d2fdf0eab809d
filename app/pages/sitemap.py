"""`/sitemap.xml` and `/robots.txt`: where crawlers find the record pages.

The sitemap names the page of every record the public may read, with `lastmod` from
`updated_at`. Above `URLS_PER_SITEMAP` pages it is a sitemap index of `/sitemap-<n>.xml` parts
(the sitemaps.org limit). Each answer is streamed: records are read in keyset batches and
written with lxml's incremental writer, so memory does not grow with the number of records.
"""

from __future__ import annotations

import io
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


def _batches(start: uuid.UUID | None, limit: int) -> Iterator[list[Any]]:
    """The public records from id `start` on, in id order, `limit` at most, BATCH at a time."""
    query = select(FileRecord.id, FileRecord.updated_at).where(access.visible(None))
    after: uuid.UUID | None = None
    left = limit
    while left > 0:
        page = query
        if after is not None:
            page = page.where(FileRecord.id > after)
        elif start is not None:
            page = page.where(FileRecord.id >= start)
        asked = min(BATCH, left)
        rows = list(db.session.execute(page.order_by(FileRecord.id).limit(asked)))
        if rows:
            yield rows
        if len(rows) < asked:
            return
        left -= len(rows)
        after = rows[-1].id


def _first_id_of_part(number: int, size: int) -> uuid.UUID | None:
    """The first record id of part `number` (1, 2, ...): an offset in the primary key index."""
    query = (
        select(FileRecord.id)
        .where(access.visible(None))
        .order_by(FileRecord.id)
        .offset((number - 1) * size)
        .limit(1)
    )
    return db.session.scalar(query)


def _drain(buffer: io.BytesIO) -> bytes:
    data = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return data


def _element(xf: Any, name: str, text: str) -> None:
    with xf.element(f"{{{NAMESPACE}}}{name}"):
        xf.write(text)


def _urlset(start: uuid.UUID | None, limit: int) -> Iterator[bytes]:
    buffer = io.BytesIO()
    pages = external_url(f"{request.script_root}/records/")
    with etree.xmlfile(buffer, encoding="utf-8") as xf:
        xf.write_declaration()
        with xf.element(f"{{{NAMESPACE}}}urlset", nsmap={None: NAMESPACE}):
            for rows in _batches(start, limit):
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
    size = URLS_PER_SITEMAP
    total = released_count()
    if total > size:
        return _streamed(_index(math.ceil(total / size)))
    return _streamed(_urlset(None, size))


@bp.get("/sitemap-<int:number>.xml")
def sitemap_part(number: int) -> Response:
    """Part `number` of the sitemap: the records from place (number-1)*size on, in id order."""
    size = URLS_PER_SITEMAP
    if number < 1 or number > max(1, math.ceil(released_count() / size)):
        raise RecordNotFound()
    start = _first_id_of_part(number, size) if number > 1 else None
    if number > 1 and start is None:
        raise RecordNotFound()
    return _streamed(_urlset(start, size))


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
