"""Lists of records: which records a list shows, in which order, a page at a time, with exact
totals that stay cheap at a million records.

Who may see what comes from app/files/access.py; this module filters, orders and counts.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, func, select, true, tuple_

from app.auth.services import Caller
from app.extensions import db
from app.files import access
from app.models import FilePathCount, FileRecord, UserFileCount
from app.search import index as search_index

# Lists run newest first; the id breaks ties, so the order is total and stable across pages.
NEWEST_FIRST = (FileRecord.created_at.desc(), FileRecord.id.desc())

#: A record's place in list order, (created_at, id): what a keyset cursor remembers.
Position = tuple[datetime, uuid.UUID]


@dataclass(frozen=True)
class Page:
    items: list[Any]  # rows with FileRecord's attributes
    total: int
    page: int
    per_page: int
    next_position: Position | None


@dataclass(frozen=True)
class KeysetPage:
    items: list[Any]  # rows with FileRecord's attributes
    per_page: int
    next_position: Position | None


def position_of(record: FileRecord) -> Position:
    return (record.created_at, record.id)


def _escape_like(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


#: The list filters a query may carry (besides `page` or `cursor`); `q` is a parsed search.
FILTERS = ("path", "aktiv_id", "reprotyp", "since", "freigabe", "q")


def filtered(
    query: Select[tuple[FileRecord]], filters: Mapping[str, Any]
) -> Select[tuple[FileRecord]]:
    if "path" in filters:
        query = query.where(FileRecord.path.like(_escape_like(filters["path"]) + "%", escape="\\"))
    if "aktiv_id" in filters:
        query = query.where(FileRecord.aktiv_id == filters["aktiv_id"])
    if "reprotyp" in filters:
        query = query.where(FileRecord.reprotyp == filters["reprotyp"])
    if "since" in filters:
        query = query.where(FileRecord.created_at >= filters["since"])
    if "freigabe" in filters:
        query = query.where(FileRecord.freigabe.is_(filters["freigabe"]))
    # pragma: no mutate start (search has its own tests; docs/mutation.md)
    if "q" in filters:
        query = search_index.matching(query, filters["q"], db.session.get_bind())
    # pragma: no mutate end
    return query


@dataclass(frozen=True)
class Listing:
    """The records one list shows: those `caller` may see (None: the public), filtered."""

    caller: Caller | access.LinkHolder | None
    filters: Mapping[str, Any]
    #: Best search matches first (then newest first); only with a `q` filter.
    relevance: bool = False

    @classmethod
    def of(cls, caller: Caller | access.LinkHolder | None, params: Mapping[str, Any]) -> Listing:
        filters = {name: params[name] for name in FILTERS if name in params}
        # pragma: no mutate start (search)
        return cls(caller, filters, "q" in filters and params.get("sort") == "relevance")
        # pragma: no mutate end

    @property
    def owner_id(self) -> int | None:
        """The owner whose records these are, for a signed-in caller who is no administrator."""
        caller = self.caller
        if caller is None or isinstance(caller, access.LinkHolder) or caller.is_admin:
            return None
        return caller.id

    def order(self) -> list[Any]:
        if not self.relevance:
            return list(NEWEST_FIRST)
        # pragma: no mutate start (search)
        return [*search_index.best_first(self.filters["q"], db.session.get_bind()), *NEWEST_FIRST]
        # pragma: no mutate end

    def query(self) -> Select[tuple[FileRecord]]:
        return filtered(select(FileRecord).where(access.visible(self.caller)), self.filters)

    def folders(self) -> tuple[str | None, bool | None] | None:
        """(path prefix, release state) if the folder counts describe exactly these records.

        They do for everyone's records filtered by nothing but path and release state: the
        administrator's and the public lists. Other filters and own lists count rows.
        """
        if self.owner_id is not None or set(self.filters) - {"path", "freigabe"}:
            return None
        if isinstance(self.caller, access.LinkHolder):  # one record, or one creator's
            return None
        freigabe = self.filters.get("freigabe")
        if self.caller is None:  # the public sees released records only
            if freigabe is False:
                return None
            freigabe = True
        return self.filters.get("path"), freigabe


def _folder_conditions(prefix: str | None, freigabe: bool | None) -> list[Any]:
    """The rows of file_path_counts for a path prefix and release state (None: any)."""
    c = FilePathCount
    conditions: list[Any] = [c.n > 0]
    if prefix is not None:
        # Records without a path are counted under "", which no prefix may match.
        conditions += [c.path.like(_escape_like(prefix) + "%", escape="\\"), c.path != ""]
    if freigabe is not None:
        conditions.append(c.freigabe.is_(freigabe))
    return conditions


@dataclass(frozen=True)
class Folders:
    """The folders (path and release state) under a prefix, and how many records they hold."""

    prefix: str | None
    freigabe: bool | None
    count: int
    records: int

    def conditions(self) -> list[Any]:
        return _folder_conditions(self.prefix, self.freigabe)


def folders_of(listing: Listing) -> Folders | None:
    scope = listing.folders()
    if scope is None:
        return None
    count, records = db.session.execute(
        select(func.count(), func.coalesce(func.sum(FilePathCount.n), 0)).where(
            *_folder_conditions(*scope)
        )
    ).one()
    return Folders(*scope, count, int(records))


#: Index entries a path-filtered list may read to avoid walking all records in date order.
READ_BUDGET = 20_000


def _in_order(
    listing: Listing, folders: Folders | None, after: Position | None, offset: int, limit: int
) -> list[FileRecord]:
    """`limit` records of the listing in list order after `after`, skipping `offset`.

    Plain lists walk a (…, created_at, id) index newest first. A path prefix is different:
    its records are often all old (``reports/2019``), so that walk would pass most of the
    table before it finds one. With the folder counts at hand, PostgreSQL reads such a list
    the cheaper of two ways, each bounded by what the filter matches rather than by the
    table: the newest records of every matching folder (``ix_file_records_path`` is ordered
    by date within a folder), or every matching record from the same index, then sorted.
    Only when both would read more than READ_BUDGET entries are the matches dense enough
    for the date walk. SQLite (the small embedded case) always walks.
    """
    # pragma: no mutate start (how PostgreSQL reads a path page; docs/mutation.md)
    depth = offset + limit
    if (
        folders is not None
        and folders.prefix is not None
        and db.session.get_bind().dialect.name == "postgresql"
        and min(folders.count * depth, folders.records) <= READ_BUDGET
    ):
        if folders.count * depth <= folders.records:
            picked = _newest_per_folder(folders, after, depth)
        else:
            picked = _all_matches(listing, after).cte("matching").prefix_with("MATERIALIZED")
        ids = (
            select(picked.c.id)
            .order_by(picked.c.created_at.desc(), picked.c.id.desc())
            .offset(offset)
            .limit(limit)
        )
        query = select(FileRecord).where(FileRecord.id.in_(ids.scalar_subquery()))
        return _rows(query.order_by(*NEWEST_FIRST))
    # pragma: no mutate end
    query = listing.query()
    if after is not None:
        query = query.where(before(after))
    return _rows(query.order_by(*listing.order()).offset(offset).limit(limit))


def _rows(query: Select[tuple[FileRecord]]) -> list[Any]:
    """A page as plain rows with the record's attributes: lists only read them, and 100 rows
    cost a fraction of building 100 ORM objects (identity map, instrumented state)."""
    return list(db.session.execute(query.with_only_columns(*FileRecord.__table__.columns)))


def before(after: Position) -> Any:
    """The condition of the rows after `after` in newest-first order."""
    return tuple_(FileRecord.created_at, FileRecord.id) < tuple_(*after)


def _all_matches(listing: Listing, after: Position | None) -> Select[Any]:
    query = listing.query().with_only_columns(FileRecord.created_at, FileRecord.id)
    return query.where(before(after)) if after is not None else query


def _newest_per_folder(folders: Folders, after: Position | None, depth: int) -> Any:
    c = FilePathCount
    newest = select(FileRecord.created_at, FileRecord.id).where(
        FileRecord.path == c.path, FileRecord.freigabe == c.freigabe
    )
    if after is not None:
        newest = newest.where(before(after))
    newest = newest.order_by(*NEWEST_FIRST).limit(depth).lateral("newest")
    return (
        select(newest.c.created_at, newest.c.id)
        .select_from(c)
        .join(newest, true())
        .where(*folders.conditions())
        .subquery("picked")
    )


def paginate(listing: Listing, page: int, per_page: int) -> Page:
    """A numbered page and the exact total.

    The total comes from the folder counts where they describe the list (a few rows per
    folder), or from the owner's count for an unfiltered own list; otherwise every matching
    row is counted.
    """
    folders = folders_of(listing)
    total = folders.records if folders is not None else _owned_count(listing)
    if total is None:
        matching = listing.query().order_by(None).subquery()
        total = db.session.scalar(select(func.count()).select_from(matching)) or 0
    items = _in_order(listing, folders, None, (page - 1) * per_page, per_page)
    # A cursor continues newest first, which is not where a page in relevance order ends.
    more = (page - 1) * per_page + len(items) < total and not listing.relevance
    return Page(items, total, page, per_page, position_of(items[-1]) if more else None)


def _owned_count(listing: Listing) -> int | None:
    """The number of records of an own list without filters, from the owner's count."""
    if listing.owner_id is None or listing.filters:
        return None
    count = db.session.scalar(
        select(UserFileCount.n).where(UserFileCount.user_id == listing.owner_id)
    )
    return count or 0


def keyset_page(listing: Listing, after: Position | None, per_page: int) -> KeysetPage:
    """The records after `after` in list order: an index range read, however deep."""
    # Without a total, the folder counts only matter for choosing how to read a path prefix.
    folders = folders_of(listing) if "path" in listing.filters else None  # pragma: no mutate
    rows = _in_order(listing, folders, after, 0, per_page + 1)
    items = rows[:per_page]
    more = len(rows) > per_page
    return KeysetPage(items, per_page, position_of(items[-1]) if more else None)
