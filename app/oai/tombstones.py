"""Persistent deletions: a released record that is deleted or unreleased leaves a tombstone,
written by the same flush as the change, so that the commit that hides a record is the
commit that tells harvesters about it. Releasing the record again removes its tombstone."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, inspect
from sqlalchemy.orm import Session

from app.models import FileRecord, OaiTombstone, utcnow


def _released_before(record: FileRecord) -> bool:
    """Whether the record was released as last read from the database."""
    history = inspect(record).attrs.freigabe.history
    if history.deleted:
        return history.deleted[0] is True
    if history.unchanged:
        return history.unchanged[0] is True
    return False


def _path_before(record: FileRecord) -> str | None:
    history = inspect(record).attrs.path.history
    return (history.deleted or history.unchanged or [record.path])[0]


def _series_before(record: FileRecord) -> str | None:
    history = inspect(record).attrs.series_slug.history
    return (history.deleted or history.unchanged or [record.series_slug])[0]


def _bury(session: Session, record: FileRecord) -> None:
    tombstone = session.get(OaiTombstone, record.id)
    if tombstone is None:
        session.add(
            OaiTombstone(
                record_id=record.id,
                path=_path_before(record),
                series_slug=_series_before(record),
                deleted_at=utcnow(),
            )
        )


def write_tombstones(session: Session, _flush_context: Any, _instances: Any) -> None:
    for record in list(session.deleted):
        if isinstance(record, FileRecord) and _released_before(record):
            _bury(session, record)
    for record in list(session.dirty):
        if not isinstance(record, FileRecord):
            continue
        if _released_before(record) and record.freigabe is False:
            _bury(session, record)
        elif not _released_before(record) and record.freigabe is True:
            tombstone = session.get(OaiTombstone, record.id)
            if tombstone is not None:
                session.delete(tombstone)


def init_app() -> None:
    if not event.contains(Session, "before_flush", write_tombstones):
        event.listen(Session, "before_flush", write_tombstones)
