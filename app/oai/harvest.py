"""What OAI-PMH harvesters see: released records and the tombstones of those that left the
public view, in datestamp order, a page at a time.

A list is read by keyset, never by OFFSET: a resumption token remembers the (datestamp, id) of
the last item it delivered, so page 10,000 of a full harvest costs what page 1 costs. Live
records are what the public may see (`access.visible(None)`, app/files/access.py) over the partial
index `ix_file_records_released_updated`; tombstones from `ix_oai_tombstones_deleted`. The two
ordered reads are merged here.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, or_, select, tuple_

from app.extensions import db
from app.files import access
from app.models import FilePathCount, FileRecord, OaiTombstone, Series
from app.schemas.attribution import SERIES_SET

#: A place in harvest order: (datestamp with microseconds, record id).
Position = tuple[datetime, uuid.UUID]


@dataclass(frozen=True)
class Window:
    """The selective-harvesting arguments: a set (a folder path) and a datestamp range."""

    folder: str | None = None
    start: datetime | None = None  # inclusive
    end: datetime | None = None  # exclusive
    #: A series' set (`series~<slug>`): its records, and the tombstones of those it had.
    series: str | None = None


@dataclass(frozen=True)
class Item:
    position: Position
    path: str | None
    record: Any  # a row with FileRecord's columns, or None for a deleted record
    series: str | None = None

    @property
    def deleted(self) -> bool:
        return self.record is None


def _like_prefix(folder: str) -> str:
    escaped = folder.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "/%"


def _in_window(query: Any, stamp: Any, path: Any, window: Window, series: Any) -> Any:
    if window.folder is not None:
        query = query.where(_in_folder(path, window.folder))
    if window.series is not None:
        query = query.where(series == window.series)
    if window.start is not None:
        query = query.where(stamp >= window.start)
    if window.end is not None:
        query = query.where(stamp < window.end)
    return query


def _released() -> Any:
    return select(FileRecord).where(access.visible(None))


def _live(window: Window) -> Any:
    return _in_window(
        _released(), FileRecord.updated_at, FileRecord.path, window, FileRecord.series_slug
    )


def _gone(window: Window) -> Any:
    t = OaiTombstone
    return _in_window(select(t), t.deleted_at, t.path, window, t.series_slug)


def count(window: Window) -> int:
    """How many items the whole list holds (the resumption token's completeListSize)."""
    live = _live(window).with_only_columns(func.count(), maintain_column_froms=True)
    gone = _gone(window).with_only_columns(func.count(), maintain_column_froms=True)
    return (db.session.scalar(live) or 0) + (db.session.scalar(gone) or 0)


def page(window: Window, after: Position | None, size: int) -> tuple[list[Item], bool]:
    """Up to `size` items after `after` in (datestamp, id) order, and whether more follow."""
    live = _live(window)
    gone = _gone(window)
    if after is not None:
        live = live.where(tuple_(FileRecord.updated_at, FileRecord.id) > tuple_(*after))
        gone = gone.where(tuple_(OaiTombstone.deleted_at, OaiTombstone.record_id) > tuple_(*after))
    live_rows = db.session.execute(
        live.with_only_columns(*FileRecord.__table__.columns)
        .order_by(FileRecord.updated_at, FileRecord.id)
        .limit(size + 1)
    ).all()
    gone_rows = db.session.scalars(
        gone.order_by(OaiTombstone.deleted_at, OaiTombstone.record_id).limit(size + 1)
    ).all()
    merged = list(_merge(live_rows, gone_rows))[: size + 1]
    return merged[:size], len(merged) > size


def _merge(live_rows: list[Any], gone_rows: list[OaiTombstone]) -> Iterator[Item]:
    live = (Item((row.updated_at, row.id), row.path, row, row.series_slug) for row in live_rows)
    gone = (Item((t.deleted_at, t.record_id), t.path, None, t.series_slug) for t in gone_rows)
    return heapq.merge(live, gone, key=lambda item: item.position)


def find(record_id: uuid.UUID) -> Item | None:
    """One released record, or the tombstone of one that was; None if neither exists."""
    row = db.session.execute(
        _released()
        .with_only_columns(*FileRecord.__table__.columns)
        .where(FileRecord.id == record_id)
    ).first()
    if row is not None:
        return Item((row.updated_at, row.id), row.path, row, row.series_slug)
    tombstone = db.session.get(OaiTombstone, record_id)
    if tombstone is not None:
        position = (tombstone.deleted_at, tombstone.record_id)
        return Item(position, tombstone.path, None, tombstone.series_slug)
    return None


def earliest_datestamp() -> datetime | None:
    live = db.session.scalar(_live(Window()).with_only_columns(func.min(FileRecord.updated_at)))
    gone = db.session.scalar(select(func.min(OaiTombstone.deleted_at)))
    stamps = [stamp for stamp in (live, gone) if stamp is not None]
    return min(stamps) if stamps else None


def _released_paths() -> Any:
    """The paths of released records, from the few rows of `file_path_counts` (migration
    0005), not from the records. Tombstones do not count: a folder whose released records
    are all gone is no set any more, though its deleted records stay harvestable by `set`."""
    counts = FilePathCount
    return select(counts.path).where(counts.freigabe.is_(True), counts.n > 0, counts.path != "")


def set_page(after: str | None, size: int) -> tuple[list[str], str | None]:
    """About `size` sets (folders) that first occur in released paths after the path `after`,
    and the path to resume after (None when the list is complete).

    Paths are read in index order; each folder is listed at the first path in that order
    that lies in it, so a page costs one read of paths and one lookup per path, however
    many sets there are, and no page holds more than `size` paths' worth of sets.
    """
    counts = FilePathCount
    query = _released_paths().order_by(counts.path).limit(size + 1)
    if after is not None:
        query = query.where(counts.path > after)
    found: list[str] = []
    previous = after
    for path in db.session.scalars(query):
        if len(found) >= size:
            return found, previous
        found.extend(_first_seen(path, previous))
        previous = path
    return found, None


def _in_folder(path: Any, folder: str) -> Any:
    """`path` is `folder` or inside it."""
    if db.session.get_bind().dialect.name == "sqlite":
        # In SQLite's byte order the paths inside a folder lie between "folder/" and
        # "folder0" ("0" follows "/"): a range the index reads (as the case-sensitive LIKE of
        # app/database.py now would too).
        return or_(path == folder, and_(path >= folder + "/", path < folder + "0"))
    # PostgreSQL reads a prefix LIKE from the text_pattern_ops index (migration 0005).
    return or_(path == folder, path.like(_like_prefix(folder), escape="\\"))


def _first_seen(path: str, previous: str | None) -> list[str]:
    """The folders of `path` that no released path before it lies in, outermost first.

    A folder holds the folders inside it, so the folders seen before are the outer ones: those
    `previous` lies in need no lookup, and a binary search finds where the rest begin (a few
    lookups of one cached statement, however deep the path).
    """
    folders = parents(path)
    shared = set(parents(previous))
    low, high = 0, len(folders)
    while low < high and folders[low] in shared:
        low += 1
    while low < high:
        middle = (low + high) // 2
        if _seen_before(folders[middle], path):
            low = middle + 1
        else:
            high = middle
    return folders[low:]


def _seen_before(folder: str, path: str) -> bool:
    counts = FilePathCount
    earlier = _released_paths().where(counts.path < path, _in_folder(counts.path, folder))
    return bool(db.session.scalar(select(earlier.exists())))


def parents(path: str | None) -> list[str]:
    """`a/b/c` is in the sets a, a/b and a/b/c."""
    if not path:
        return []
    segments = path.split("/")
    return ["/".join(segments[: i + 1]) for i in range(len(segments))]


def series_sets(*, bare: bool = False) -> list[tuple[str, str]]:
    """(setSpec, setName) of every series, by slug: few, curated, listed whole (`bare`: the
    slug instead of the setSpec)."""
    return [
        (slug if bare else SERIES_SET + slug, title)
        for slug, title in db.session.execute(
            select(Series.slug, Series.title).order_by(Series.slug)
        )
    ]
