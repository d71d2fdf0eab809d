"""Which records a feed lists: what a member of the public could download right now, newest
release first. A record is released at its creation, or, under embargo, at the start of the
day the embargo ends (in the service's time zone), so it appears in the feeds on that day."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import func, or_, select

from app.extensions import db
from app.files import access
from app.files.listing import filtered
from app.models import FileRecord, OaiTombstone, record_digest

FEED_SIZE = 50


@dataclass(frozen=True)
class Entry:
    record: Any  # a row with FileRecord's columns
    released_at: datetime


def _released_at(record: Any, timezone: str) -> datetime:
    if record.sperrfrist is None:
        return record.created_at
    day_starts = datetime.combine(record.sperrfrist, time(), tzinfo=ZoneInfo(timezone))
    return max(record.created_at, day_starts.astimezone(UTC))


def entries(
    path: str | None,
    today: date,
    timezone: str,
    *,
    media_only: bool,
    size: int = FEED_SIZE,
    series: str | None = None,
) -> list[Entry]:
    """The newest `size` downloadable records under `path` (and of `series`), newest release
    first (the front page, app/pages/front.py, shows the newest few of them).

    Two short reads cover both ways a record becomes available: the newest creations without
    an active embargo, and the embargoes that ended most recently.
    """
    # What the public may download today (which implies what it may see).
    query = select(FileRecord).where(access.downloadable(None, today))
    query = filtered(query, {"path": path} if path is not None else {})
    if series is not None:  # a series' feed (issue 49)
        query = query.where(FileRecord.series_slug == series)
    if media_only:
        query = query.where(
            or_(FileRecord.mime_type.like("audio/%"), FileRecord.mime_type.like("video/%"))
        )
    columns = FileRecord.__table__.columns
    newest = query.with_only_columns(*columns).order_by(FileRecord.created_at.desc())
    ended = (
        query.where(FileRecord.sperrfrist <= today)  # a range the index can start from
        .with_only_columns(*columns)
        .order_by(FileRecord.sperrfrist.desc())
    )
    rows = {}
    for statement in (newest, ended):
        for row in db.session.execute(statement.limit(size)):
            rows[row.id] = row
    found = [Entry(row, _released_at(row, timezone)) for row in rows.values()]
    found.sort(key=lambda entry: (entry.released_at, entry.record.id), reverse=True)
    return found[:size]


def version(
    kind: str, path: str | None, found: list[Entry], updated: datetime | None, shown: str = ""
) -> str:
    """An entity tag that changes whenever the feed's content would (its entries, what it
    shows of them besides their values (`shown`: their DOIs), or the `updated` an empty feed
    shows)."""
    stamp = updated.isoformat() if updated else ""
    digest = hashlib.sha256(f"{kind}|{path}|{stamp}|{shown}".encode())
    for entry in found:
        # Every value of the record, so that a change made by SQL (which leaves `updated_at`
        # as it was) changes the tag too.
        digest.update(f"|{record_digest(entry.record)}".encode())
    return digest.hexdigest()[:32]


def last_modified(found: list[Entry]) -> datetime | None:
    stamps = [max(e.record.updated_at, e.released_at) for e in found]
    return max(stamps) if stamps else None


def last_public_change() -> datetime | None:
    """The latest change any member of the public could have seen: a released record changed,
    or one left the public view (its OAI-PMH tombstone). An empty feed was last changed then
    at the latest; None if nothing was ever released."""
    changed = db.session.scalar(select(func.max(FileRecord.updated_at)).where(access.visible(None)))
    removed = db.session.scalar(select(func.max(OaiTombstone.deleted_at)))
    stamps = [stamp for stamp in (changed, removed) if stamp is not None]
    return max(stamps) if stamps else None
