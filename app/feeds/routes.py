from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from feedgen.feed import FeedGenerator
from flask import Response, current_app, request, url_for
from lxml import etree
from marshmallow import EXCLUDE, Schema

from app.covers import services as covers
from app.database import read_without_transaction
from app.docs.openapi import (
    CACHED,
    NO_TOKEN,
    REVALIDATION_ETAG,
    SERVER,
    Blueprint,
    header,
    in_query,
)
from app.doi import lookup
from app.exceptions import ValidationFailed
from app.extensions import db
from app.feeds import services
from app.files import access, answers
from app.http import absolute_url, load
from app.models import Series
from app.oai.xml import title_of, xml_text
from app.schemas.field_types import PlainString

bp = Blueprint(
    "feeds",
    __name__,
    url_prefix="/api/public",
    tag="Public",
    errors=SERVER,
    error_headers=CACHED,
    security=NO_TOKEN,
)
bp.before_request(read_without_transaction)


ATOM = "http://www.w3.org/2005/Atom"
#: Media RSS, whose `thumbnail` feed readers show beside an Atom entry.
MEDIA = "http://search.yahoo.com/mrss/"
ATOM_TYPE = "application/atom+xml; charset=utf-8"
RSS_TYPE = "application/rss+xml; charset=utf-8"
PATH_ABOUT = "Path prefix, as in the list: only records whose path starts with it."


class FeedQuerySchema(Schema):
    class Meta:
        unknown = EXCLUDE

    path = PlainString(metadata={"description": PATH_ABOUT})
    series = PlainString(
        metadata={"description": "A series' slug: only its records (422 for no such series)."}
    )


feed_query_schema = FeedQuerySchema()


def _feed_operation(operation_id: str, media_type: str) -> Any:
    """The operation of a feed: the same parameters and answers, in its own media type."""
    declare = bp.doc(
        operationId=operation_id,
        parameters=in_query(feed_query_schema),
        responses={
            "200": {
                "description": "The feed.",
                "headers": {
                    **CACHED,
                    "ETag": REVALIDATION_ETAG,
                    "Last-Modified": header(
                        "The newest change or release in the feed.", {"type": "string"}, False
                    ),
                },
                "content": {media_type: {"schema": {"type": "string"}}},
            },
            "304": {"description": "The cached copy is current.", "headers": CACHED},
        },
    )
    return lambda view: declare(bp.errors("ValidationFailed")(view))


def _query() -> tuple[str | None, Series | None]:
    """The feed's folder (`path`) and series (`series`, 422 when there is none such)."""
    args = {k: v for k, v in request.args.to_dict().items() if v != ""}
    query = load(feed_query_schema, args)
    slug = query.get("series")
    series = db.session.get(Series, slug) if slug is not None else None
    if slug is not None and series is None:
        raise ValidationFailed({"series": [f"There is no series {slug}."]})
    return query.get("path"), series


@dataclass(frozen=True)
class Feed:
    generator: FeedGenerator
    entries: list[services.Entry]
    path: str | None
    modified: datetime | None  # Last-Modified, and what an empty feed's ETag depends on
    #: The entries' covers by record id (every entry may be downloaded: app/covers).
    covers: dict[uuid.UUID, covers.Shown]
    #: The series it lists (`series=`), by slug and title, or "".
    series: str = ""

    def shown(self) -> str:
        """What the feed prints of its covers, for its ETag."""
        return repr(sorted((str(k), v.url(1200, "jpg")) for k, v in self.covers.items()))


def _feed(media_only: bool) -> Feed:
    path, series = _query()
    config = current_app.config
    found = services.entries(
        path,
        access.today(),
        config["APP_TIMEZONE"],
        media_only=media_only,
        series=series.slug if series else None,
    )
    name = config.get("REPOSITORY_NAME") or "File repository"
    title = xml_text(f"{name}: {path}" if path else name)
    if series is not None:
        title = xml_text(f"{title}: {series.title}")
    self_url = xml_text(absolute_url(request.full_path.rstrip("?")))
    fg = FeedGenerator()
    fg.id(self_url)
    fg.title(title)
    fg.author({"name": name})
    fg.link(href=self_url, rel="self")
    # People read a feed's releases on the nearest folder page that holds all of them.
    folder = (path or "").rpartition("/")[0]
    page = url_for("pages.browse", folder=folder)
    if series is not None:  # the series' page holds its releases
        page = url_for("pages.series", slug=series.slug)
    fg.link(href=absolute_url(page), rel="alternate", type="text/html")
    fg.description(f"Newest releases of {title}.")
    fg.language("de")
    modified = services.last_modified(found) or services.last_public_change()
    # Nothing ever released: the feed is as new as the answer.
    fg.updated(modified or datetime.now(UTC))
    made = covers.shown_for([entry.record for entry in found])
    pictures = {
        record_id: shown
        for record_id, cover in made.items()
        if (shown := covers.shown_at(cover, absolute_url(f"/records/{record_id}")))
    }
    named = f"{series.slug}\0{series.title}" if series is not None else ""
    return Feed(fg, found, path, modified, pictures, named)


def _add_entry(fg: FeedGenerator, entry: services.Entry) -> Any:
    record = entry.record
    # The record's landing page (app/pages), where people read it; the content stays the
    # enclosure.
    record_url = absolute_url(url_for("pages.record", record_id=record.id))
    download_url = absolute_url(url_for("public.download_released", record_id=record.id))
    fe = fg.add_entry(order="append")
    fe.id(f"urn:uuid:{record.id}")
    fe.guid(f"urn:uuid:{record.id}", permalink=False)
    fe.title(title_of(record))
    fe.link(href=record_url, rel="alternate", type="text/html")
    fe.enclosure(download_url, str(record.size), record.mime_type)
    fe.published(entry.released_at)
    fe.updated(max(record.updated_at, entry.released_at))
    if author := xml_text(record.autoren or "").strip():
        fe.author({"name": author})
    if summary := xml_text(record.beschreibung or "").strip():
        fe.summary(summary)
    for keyword in xml_text(record.sachschlagwoerter or "").split(","):
        if keyword.strip():
            fe.category(term=keyword.strip())
    return fe


def _conditional(
    body: bytes, content_type: str, kind: str, feed: Feed, shown: str = ""
) -> Response:
    """The feed with its ETag (of `shown` too: what it prints besides its records' values)
    and Last-Modified, or 304."""
    response = Response(body, content_type=content_type)
    response.set_etag(
        services.version(kind, feed.path, feed.entries, feed.modified, f"{feed.series}|{shown}")
    )
    if feed.modified is not None:
        response.last_modified = feed.modified
    return response.make_conditional(request)


def _dated(response: Response) -> bool:
    """A feed that has a release shows its newest change; one that never had any shows the
    time it was made, and is made afresh."""
    return response.last_modified is not None


@bp.get("/feed.atom")
@_feed_operation("getAtomFeed", "application/atom+xml")
@answers.cached(keeps=_dated)
def atom_feed() -> Response:
    """Atom feed of releases

    Atom 1.0: the newest 50 records a member of the public can download now, newest release
    first (an embargoed record is released on the day its embargo ends). Each entry links its
    record's landing page and its download as an enclosure, and its DOI (`rel="related"`)
    where it has one. Revalidate with If-None-Match or If-Modified-Since.
    """
    feed = _feed(media_only=False)
    for entry in feed.entries:
        _add_entry(feed.generator, entry)
    found = lookup.dois_of(entry.record.id for entry in feed.entries)
    dois = {record_id: lookup.shown(doi) for record_id, doi in found.items()}
    atom = _with_link_attributes(feed.generator.atom_str(), feed.entries, dois, feed.covers)
    shown = repr(sorted(dois.items())) + feed.shown()
    return _conditional(atom, ATOM_TYPE, "atom", feed, shown)


def _with_link_attributes(
    atom: bytes,
    found: list[services.Entry],
    dois: dict[uuid.UUID, str | None],
    pictures: dict[uuid.UUID, covers.Shown],
) -> bytes:
    """feedgen 1.0.0 writes an Atom entry's links with their href only (its loop variable
    shadows the link data), so the alternate link and the enclosure lose rel, type and
    length; they are put back here, entry by entry, a record's DOI added as a related link
    (issue 40), and its cover as a Media RSS thumbnail (issue 50)."""
    root = etree.fromstring(atom)
    if pictures:  # the namespace declared once, on the feed
        root = _with_namespace(root, "media", MEDIA)
    for element, entry in zip(root.iterfind(f"{{{ATOM}}}entry"), found, strict=True):
        alternate, enclosure = element.findall(f"{{{ATOM}}}link")
        alternate.set("rel", "alternate")
        alternate.set("type", "text/html")
        enclosure.set("rel", "enclosure")
        enclosure.set("type", entry.record.mime_type)
        enclosure.set("length", str(entry.record.size))
        if doi := dois.get(entry.record.id):
            enclosure.addnext(etree.Element(f"{{{ATOM}}}link", rel="related", href=lookup.url(doi)))
        if cover := pictures.get(entry.record.id):
            thumbnail = etree.SubElement(element, f"{{{MEDIA}}}thumbnail")
            thumbnail.set("url", cover.url(1200, "jpg"))
            thumbnail.set("width", "1200")
            thumbnail.set("height", str(cover.height_at(1200)))
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


def _with_namespace(root: Any, prefix: str, uri: str) -> Any:
    """`root` with `prefix` declared for `uri` (lxml declares a namespace where it is first
    used otherwise, on every entry)."""
    copy = etree.Element(root.tag, nsmap={**root.nsmap, prefix: uri}, attrib=root.attrib)
    copy.text = root.text
    copy.extend(list(root))
    return copy


@bp.get("/podcast.rss")
@_feed_operation("getPodcastFeed", "application/rss+xml")
@answers.cached(keeps=_dated)
def podcast_feed() -> Response:
    """Podcast feed (RSS 2.0, iTunes)

    RSS 2.0 with the iTunes namespace: the newest 50 downloadable audio and video records, one
    `<enclosure>` each (the public download, length and type from the record). Revalidate with
    If-None-Match or If-Modified-Since.
    """
    feed = _feed(media_only=True)
    fg = feed.generator
    fg.load_extension("podcast")
    fg.podcast.itunes_author(current_app.config.get("REPOSITORY_NAME") or "File repository")
    fg.podcast.itunes_explicit("no")
    fg.podcast.itunes_category("Science")
    fg.podcast.itunes_summary(fg.description())
    # The show's artwork: the cover of its newest episode that has one.
    newest = next(
        (feed.covers[e.record.id] for e in feed.entries if e.record.id in feed.covers), None
    )
    if newest is not None:
        artwork = newest.url(1200, "jpg", versioned=False)
        fg.image(url=artwork, title=fg.title(), link=fg.link()[-1]["href"])
        fg.podcast.itunes_image(artwork)
    for entry in feed.entries:
        fe = _add_entry(fg, entry)
        if author := xml_text(entry.record.autoren or "").strip():
            fe.podcast.itunes_author(author)
        if summary := xml_text(entry.record.beschreibung or "").strip():
            fe.podcast.itunes_summary(summary)
        if cover := feed.covers.get(entry.record.id):
            fe.podcast.itunes_image(cover.url(1200, "jpg", versioned=False))
    return _conditional(fg.rss_str(pretty=False), RSS_TYPE, "podcast", feed, feed.shown())
