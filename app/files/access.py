"""Who may see a record and whether its content may be handed out: the rules, written once.

Each rule comes in the two forms the code needs, side by side: a SQL condition for queries
over many records (lists, archives, feeds, harvesting) and a check of one record already read
(single reads, downloads). Change one form and the other next to it.

- **Visible**: the public sees released records (`freigabe`); a signed-in caller sees their
  own; an administrator sees all.
- **Downloadable**: an administrator may download everything visible; anyone else only what
  is released and not under embargo (`sperrfrist` after today, in the operator's time zone).
- **A share link's holder** (app/links) sees what the link names (one record, or a folder's
  records) among what the link's creator may see at that moment, and may download all of it,
  whatever `freigabe` and `sperrfrist` say: handing out unreleased content is what it is for.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from flask import current_app
from sqlalchemy import ColumnElement, Row, Select, and_, bindparam, or_, select, true

from app.auth.services import Caller
from app.cache import RECORDS, cache_for
from app.database import lock_database_on_sqlite
from app.exceptions import DownloadBlocked, RecordNotFound
from app.extensions import db
from app.models import FileRecord

#: A record as the code reads it: the ORM object, or a row with its attributes.
RecordLike = FileRecord | Row[Any]


@dataclass(frozen=True, slots=True)
class LinkHolder:
    """Whoever presents a live share link: `creator` as the account is now (a deactivated one
    leaves no holder), and what the link names, one record or a folder (`path`)."""

    creator: Caller
    record_id: uuid.UUID | None = None
    path: str | None = None


def _in_folder(path: str) -> ColumnElement[bool]:
    """SQL: records in the folder `path` or below it (`a/b` holds `a/b/c`, not `a/bc`)."""
    return or_(FileRecord.path == path, FileRecord.path.startswith(path + "/", autoescape=True))


def _named_by(holder: LinkHolder) -> ColumnElement[bool]:
    if holder.record_id is not None:
        return FileRecord.id == holder.record_id
    return _in_folder(holder.path or "")


def _is_named_by(holder: LinkHolder, record: RecordLike) -> bool:
    if holder.record_id is not None:
        return record.id == holder.record_id
    path, folder = record.path or "", holder.path or ""
    return path == folder or path.startswith(folder + "/")


# --- visible ------------------------------------------------------------------------------


def visible(caller: Caller | LinkHolder | None) -> ColumnElement[bool]:
    """SQL: the records `caller` may see (None: the public)."""
    if isinstance(caller, LinkHolder):
        return and_(visible(caller.creator), _named_by(caller))
    if caller is None:
        return FileRecord.freigabe.is_(True)
    if caller.is_admin:
        return true()
    return FileRecord.user_id == caller.id


def may_see(caller: Caller | LinkHolder | None, record: RecordLike) -> bool:
    """The same as `visible`, for one record already read."""
    if isinstance(caller, LinkHolder):
        return may_see(caller.creator, record) and _is_named_by(caller, record)
    if caller is None:
        return record.freigabe is True
    return caller.is_admin or record.user_id == caller.id


# --- downloadable -------------------------------------------------------------------------


def downloadable(caller: Caller | LinkHolder | None, today: date) -> ColumnElement[bool]:
    """SQL: whether `caller` may download a record's content on `today`. For the public it
    implies `visible(None)`; for anyone else combine it with `visible(caller)`."""
    if isinstance(caller, LinkHolder) or (caller is not None and caller.is_admin):
        return true()
    return FileRecord.freigabe.is_(True) & or_(
        FileRecord.sperrfrist.is_(None), FileRecord.sperrfrist <= today
    )


def embargo_active(record: RecordLike, today: date) -> bool:
    """Download is blocked while the embargo date is after today; on the day it is allowed."""
    return record.sperrfrist is not None and record.sperrfrist > today


def publication_date(record: RecordLike) -> date:
    """The day a record is published, told the same everywhere (pages, citations, exports,
    OAI-PMH, DataCite's `publicationYear`): the day its content is public to all, its upload
    day (UTC) or the end of a later embargo, as DataCite asks for embargoed resources. Under
    embargo it lies ahead (the page says "Verfügbar ab" that day)."""
    created = record.created_at.astimezone(UTC).date()
    return max(created, record.sperrfrist) if record.sperrfrist else created


def public_now(record: RecordLike, today: date) -> bool:
    """Whether anyone may download the record's content without an account now: the same as
    `downloadable(None, today)`, for one record."""
    return record.freigabe is True and not embargo_active(record, today)


def check_downloadable(caller: Caller | LinkHolder | None, record: RecordLike, today: date) -> None:
    """The same as `downloadable`, for one visible record; says why not."""
    if isinstance(caller, LinkHolder) or (caller is not None and caller.is_admin):
        return
    if not record.freigabe:
        raise DownloadBlocked("This file is not released for download.")
    if embargo_active(record, today):
        raise DownloadBlocked(
            f"This file is under embargo until {record.sperrfrist.isoformat()}."  # type: ignore[union-attr]
        )


def today() -> date:
    """Embargo dates are calendar days in the operator's time zone (`APP_TIMEZONE`)."""
    return datetime.now(ZoneInfo(current_app.config["APP_TIMEZONE"])).date()


# --- one record ---------------------------------------------------------------------------


# Built once: building a statement per request costs more than running it. It reads the record
# whoever asks, so that one cached row serves everyone; `may_see` then decides.
_READ_RECORD = select(*FileRecord.__table__.columns).where(FileRecord.id == bindparam("record_id"))


def read_record(
    caller: Caller | LinkHolder | None, record_id: uuid.UUID, *, fresh: bool = False
) -> Row[Any]:
    """One record `caller` may see, for a view that only reads it: a plain row with the
    record's attributes (half the cost of an ORM object). On PostgreSQL it comes from this
    process's cache when it is there (app/cache.py), unless `fresh`; who may see it is
    decided on every call."""
    cache = cache_for(RECORDS)
    row, generation = (None, None) if cache is None else cache.get(RECORDS, record_id)
    if row is None or fresh:
        row = db.session.connection().execute(_READ_RECORD, {"record_id": record_id}).first()
        if row is not None and generation is not None:
            cache.put(RECORDS, generation, record_id, row)  # type: ignore[union-attr]
    if row is None or not may_see(caller, row):
        raise RecordNotFound()
    return row


def downloadable_record(
    caller: Caller | LinkHolder | None, record_id: uuid.UUID, *, fresh: bool = False
) -> Row[Any]:
    """One record whose content `caller` may download now: 404 if it is not visible, 403
    (with the reason) if it is visible but not downloadable."""
    record = read_record(caller, record_id, fresh=fresh)
    check_downloadable(caller, record, today())
    return record


def find_record(caller: Caller, record_id: uuid.UUID, *, lock: bool = False) -> FileRecord:
    """The ORM record `caller` may see, for a change; `lock` holds it until the commit."""
    statement: Select[tuple[FileRecord]] = select(FileRecord).where(
        FileRecord.id == record_id, visible(caller)
    )
    if lock:
        lock_database_on_sqlite(db.session)
        statement = statement.with_for_update()
    record = db.session.scalars(statement).first()
    if record is None:
        raise RecordNotFound()
    return record
