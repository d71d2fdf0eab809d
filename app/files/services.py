"""Business rules of file records: who sees what, availability, and ordered side effects.

Functions here take and return plain values and raise domain errors; they know nothing of HTTP.
Storage side effects follow one order: objects are stored before the rows that point at them
are committed, and removed only after the rows that pointed at them are gone.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Row, Select, bindparam, func, select, true, tuple_
from sqlalchemy import delete as sa_delete

from app.auth.services import Caller
from app.cache import RECORDS, cache_for
from app.exceptions import DownloadBlocked, RecordNotFound, ValidationFailed
from app.extensions import db
from app.files.uploads import ReceivedUpload, StagedFile
from app.models import (
    FilePathCount,
    FileRecord,
    PendingObjectDeletion,
    UserFileCount,
    utcnow,
)
from app.search import index as search_index
from app.storage import Storage, StorageError

log = logging.getLogger(__name__)


def new_object_key(record_id: uuid.UUID) -> str:
    """A fresh key per content version; never derived from names or the virtual path."""
    return f"files/{record_id}/{uuid.uuid4()}"


# --- who may see what ------------------------------------------------------------------


# Who may see what, written once: the public sees released records, a signed-in user their
# own ones, an administrator all of them.
RELEASED = FileRecord.freigabe.is_(True)


def _owned_by(owner: Any) -> Any:
    return FileRecord.user_id == owner


def visible_to(user: Caller) -> Select[tuple[FileRecord]]:
    """Records a signed-in caller may read and manage: own ones, or all for administrators."""
    query = select(FileRecord)
    return query if user.is_admin else query.where(_owned_by(user.id))


def released() -> Select[tuple[FileRecord]]:
    """Records the public may see: released ones, whatever the query asks for."""
    return select(FileRecord).where(RELEASED)


def _lock_database_on_sqlite() -> None:
    """SQLite ignores FOR UPDATE: take its write lock before the row is read, so concurrent
    changes of one record wait for each other as on PostgreSQL instead of acting on a row
    another request has just replaced or deleted. (Python's sqlite3 begins transactions
    only at the first write, so none is open yet after the request's reads.)"""
    connection = db.session.connection()
    if connection.dialect.name != "sqlite":
        return
    if not connection.connection.driver_connection.in_transaction:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def find_record(
    query: Select[tuple[FileRecord]], record_id: uuid.UUID, *, lock: bool = False
) -> FileRecord:
    statement = query.where(FileRecord.id == record_id)
    if lock:
        _lock_database_on_sqlite()
        statement = statement.with_for_update()
    record = db.session.scalars(statement).first()
    if record is None:
        raise RecordNotFound()
    return record


# The statement of `read_record`, built once (building a statement per request costs more
# than running it). It reads the record whoever asks, so that one cached row serves everyone;
# `_may_read` then applies the scopes of `visible_to` and `released`.
_READ_RECORD = select(*FileRecord.__table__.columns).where(FileRecord.id == bindparam("record_id"))


def _may_read(user: Caller | None, record: Row[Any]) -> bool:
    """`visible_to(user)`, or `released()` for None, for one record already read: the same
    rules as RELEASED and _owned_by above."""
    if user is None:
        return record.freigabe is True
    return user.is_admin or record.user_id == user.id


def read_record(user: Caller | None, record_id: uuid.UUID) -> Row[Any]:
    """One record for a view that only reads it (GET, download): what `visible_to(user)`
    shows, or `released()` when `user` is None. A plain row with the record's attributes,
    which costs half of loading an ORM object. On PostgreSQL the row comes from this
    process's cache when it has it (app/cache.py: any change to the record, by anyone,
    empties it); who may see it is decided here on every request."""
    cache = cache_for(RECORDS)
    row, generation = cache.get(RECORDS, record_id) if cache is not None else (None, None)
    if row is None:
        row = db.session.connection().execute(_READ_RECORD, {"record_id": record_id}).first()
        if row is not None and generation is not None:
            cache.put(RECORDS, generation, record_id, row)  # type: ignore[union-attr]
    if row is None or not _may_read(user, row):
        raise RecordNotFound()
    return row


def forget_cached_records() -> None:
    """Make the next `read_record` of this process go to the database."""
    cache = cache_for(RECORDS)
    if cache is not None:
        cache.forget(RECORDS)


#: A record as the views read it: the ORM object, or a row with its attributes.
RecordLike = FileRecord | Row[Any]


def embargo_active(record: RecordLike, today: date) -> bool:
    """Download is blocked while the embargo date is after today; on the day it is allowed."""
    return record.sperrfrist is not None and record.sperrfrist > today


def ensure_downloadable(record: RecordLike, *, is_admin: bool, today: date) -> None:
    if is_admin:
        return
    if not record.freigabe:
        raise DownloadBlocked("This file is not released for download.")
    if embargo_active(record, today):
        raise DownloadBlocked(
            f"This file is under embargo until {record.sperrfrist.isoformat()}."  # type: ignore[union-attr]
        )


# --- lists ------------------------------------------------------------------------------


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
    if "q" in filters:
        query = search_index.matching(query, filters["q"], db.session.get_bind())
    return query


@dataclass(frozen=True)
class Listing:
    """The records one list shows: everyone's or one owner's, released only or not, filtered."""

    owner_id: int | None
    released_only: bool
    filters: Mapping[str, Any]
    #: Best search matches first (then newest first); only with a `q` filter.
    relevance: bool = False

    @classmethod
    def of(cls, user: Caller | None, params: Mapping[str, Any]) -> Listing:
        """A signed-in caller's list, or the public list when `user` is None."""
        filters = {name: params[name] for name in FILTERS if name in params}
        relevance = "q" in filters and params.get("sort") == "relevance"
        if user is None:
            return cls(None, True, filters, relevance)
        return cls(None if user.is_admin else user.id, False, filters, relevance)

    def order(self) -> list[Any]:
        if not self.relevance:
            return list(NEWEST_FIRST)
        return [*search_index.best_first(self.filters["q"], db.session.get_bind()), *NEWEST_FIRST]

    def query(self) -> Select[tuple[FileRecord]]:
        query = select(FileRecord)
        if self.owner_id is not None:
            query = query.where(_owned_by(self.owner_id))
        if self.released_only:
            query = query.where(RELEASED)
        return filtered(query, self.filters)

    def folders(self) -> tuple[str | None, bool | None] | None:
        """(path prefix, release state) if the folder counts describe exactly these records.

        They do for everyone's records filtered by nothing but path and release state: the
        administrator's and the public lists. Other filters and own lists count rows.
        """
        if self.owner_id is not None or set(self.filters) - {"path", "freigabe"}:
            return None
        freigabe = self.filters.get("freigabe")
        if self.released_only:
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
    query = listing.query()
    if after is not None:
        query = query.where(_before(after))
    return _rows(query.order_by(*listing.order()).offset(offset).limit(limit))


def _rows(query: Select[tuple[FileRecord]]) -> list[Any]:
    """A page as plain rows with the record's attributes: lists only read them, and 100 rows
    cost a fraction of building 100 ORM objects (identity map, instrumented state)."""
    return list(db.session.execute(query.with_only_columns(*FileRecord.__table__.columns)))


def _before(after: Position) -> Any:
    return tuple_(FileRecord.created_at, FileRecord.id) < tuple_(*after)


def _all_matches(listing: Listing, after: Position | None) -> Select[Any]:
    query = listing.query().with_only_columns(FileRecord.created_at, FileRecord.id)
    return query.where(_before(after)) if after is not None else query


def _newest_per_folder(folders: Folders, after: Position | None, depth: int) -> Any:
    c = FilePathCount
    newest = select(FileRecord.created_at, FileRecord.id).where(
        FileRecord.path == c.path, FileRecord.freigabe == c.freigabe
    )
    if after is not None:
        newest = newest.where(_before(after))
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
    folders = folders_of(listing) if "path" in listing.filters else None
    rows = _in_order(listing, folders, after, 0, per_page + 1)
    items = rows[:per_page]
    more = len(rows) > per_page
    return KeysetPage(items, per_page, position_of(items[-1]) if more else None)


# --- changes ----------------------------------------------------------------------------


def _upload_errors(
    upload: ReceivedUpload, max_files: int, field: str = "files"
) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if not upload.files:
        errors[field] = [f"The {field} field is required."]
    elif len(upload.files) > max_files:
        errors[field] = [
            f"The {field} field must not have more than {max_files} items."
            if max_files > 1
            else f"The {field} field must be a single file."
        ]
    for staged in upload.files[:max_files]:
        if staged.error:
            errors.setdefault(staged.field, []).append(staged.error)
    return errors


def create_records(
    owner_id: int,
    record_ids: list[uuid.UUID],
    upload: ReceivedUpload,
    metadata: dict[str, Any],
    metadata_errors: dict[str, list[str]],
    storage: Storage,
    max_files: int,
) -> list[FileRecord]:
    """Insert one record per stored file, all or none; on failure no object stays behind."""
    errors = _upload_errors(upload, max_files) | metadata_errors
    if errors:
        upload.discard(storage)
        raise ValidationFailed(errors)
    now = utcnow()
    records = [
        FileRecord(
            id=record_ids[staged.index],
            user_id=owner_id,
            created_at=now,
            updated_at=now,
            **_content_columns(staged),
            **metadata,
        )
        for staged in upload.files
    ]
    try:
        db.session.add_all(records)
        db.session.commit()
    except BaseException:
        db.session.rollback()
        upload.discard(storage)
        raise
    return records


def _content_columns(staged: StagedFile) -> dict[str, Any]:
    return {
        "original_name": staged.original_name,
        "stored_path": staged.key,
        "checksum_sha256": staged.sha256,
        "mime_type": staged.mime_type,
        "size": staged.size,
    }


def update_metadata(record: FileRecord, changes: dict[str, Any]) -> FileRecord:
    for name, value in changes.items():
        setattr(record, name, value)
    record.updated_at = utcnow()
    db.session.commit()
    return record


def replace_content(
    query: Select[tuple[FileRecord]],
    record_id: uuid.UUID,
    upload: ReceivedUpload,
    storage: Storage,
) -> FileRecord:
    """Point the record at its new object, commit, and only then remove the old object."""
    errors = _upload_errors(upload, 1, field="file")
    if errors:
        upload.discard(storage)
        raise ValidationFailed(errors)
    staged = upload.files[0]
    try:
        record = find_record(query, record_id, lock=True)
        old_key = record.stored_path
        for name, value in _content_columns(staged).items():
            setattr(record, name, value)
        record.updated_at = utcnow()
        db.session.add(PendingObjectDeletion(key=old_key))
        db.session.commit()
    except BaseException:
        db.session.rollback()
        upload.discard(storage)
        raise
    delete_orphaned_object(storage, old_key)
    return record


def delete_record(query: Select[tuple[FileRecord]], record_id: uuid.UUID, storage: Storage) -> None:
    """Remove the row first; the object follows once nothing points at it any more.

    The bucket is asked first, so that while it is unreachable the delete is refused (503)
    and nothing changes, rather than the row going while its object stays.
    """
    record = find_record(query, record_id, lock=True)
    key = record.stored_path
    storage.exists(key)
    db.session.delete(record)
    db.session.add(PendingObjectDeletion(key=key))
    db.session.commit()
    if delete_orphaned_object(storage, key):
        retry_pending_deletions(storage, limit=RETRIES_PER_REQUEST)


RETRIES_PER_REQUEST = 5


def delete_orphaned_object(storage: Storage, key: str) -> bool:
    """Remove an object whose pending deletion is committed; on failure it stays pending."""
    try:
        storage.delete(key)
    except StorageError as exc:
        log.warning("deletion of object %s failed, left pending for a retry: %s", key, exc)
        _note_failed_attempt(key, exc)
        return False
    db.session.execute(sa_delete(PendingObjectDeletion).where(PendingObjectDeletion.key == key))
    db.session.commit()
    return True


def _note_failed_attempt(key: str, exc: Exception) -> None:
    pending = db.session.get(PendingObjectDeletion, key)
    if pending is not None:
        pending.attempts += 1
        pending.last_error = str(exc)[:1000]
        db.session.commit()


def retry_pending_deletions(storage: Storage, limit: int | None = None) -> tuple[int, int]:
    """Carry out owed deletions, oldest first; returns how many succeeded and failed."""
    statement = select(PendingObjectDeletion.key).order_by(PendingObjectDeletion.created_at)
    if limit is not None:
        statement = statement.limit(limit)
    keys = list(db.session.scalars(statement))
    done = sum(delete_orphaned_object(storage, key) for key in keys)
    return done, len(keys) - done


def today_in(timezone_name: str) -> date:
    """Embargo dates are calendar days in the operator's time zone."""
    return datetime.now(ZoneInfo(timezone_name)).date()
