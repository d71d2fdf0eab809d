"""Changes of file records: create, update, replace and delete, with their storage side effects.

Functions here take plain values (the caller, ids, staged files, loaded metadata) and raise
domain errors; they know nothing of HTTP. Storage side effects follow one order: objects are
stored before the rows that point at them are committed, and removed only after the rows
that pointed at them are gone (the `pending_object_deletions` outbox keeps what is owed).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete as sa_delete
from sqlalchemy import select

from app.auth.services import Caller
from app.extensions import db
from app.files import approval
from app.files.access import find_record
from app.files.uploads import StagedFile, discard
from app.models import FileRecord, PendingObjectDeletion, utcnow
from app.storage import Storage, StorageError

log = logging.getLogger(__name__)

#: Owed deletions a request carries out after its own, oldest first.
RETRIES_PER_REQUEST = 5


def new_object_key(record_id: uuid.UUID) -> str:
    """A fresh key per content version; never derived from names or the virtual path."""
    return f"files/{record_id}/{uuid.uuid4()}"


def _content_columns(staged: StagedFile) -> dict[str, Any]:
    return {
        "original_name": staged.original_name,
        "stored_path": staged.key,
        "checksum_sha256": staged.sha256,
        "mime_type": staged.mime_type,
        "size": staged.size,
    }


def create_records(
    owner_id: int,
    files: Sequence[tuple[uuid.UUID, StagedFile]],
    metadata: dict[str, Any],
    storage: Storage,
) -> list[FileRecord]:
    """Insert one record per stored file (record id, staged file), all or none, committing
    whatever else the session holds in the same transaction; on failure no object stays
    behind."""
    now = utcnow()
    records = [
        FileRecord(
            id=record_id,
            user_id=owner_id,
            created_at=now,
            updated_at=now,
            **_content_columns(staged),
            **metadata,
        )
        for record_id, staged in files
    ]
    try:
        db.session.add_all(records)
        for record in records:
            approval.before_commit(record, owner_id, new=True)
        db.session.commit()
    except BaseException:
        db.session.rollback()
        discard([staged for _, staged in files], storage)
        raise
    return records


def update_metadata(caller: Caller, record_id: uuid.UUID, changes: dict[str, Any]) -> FileRecord:
    record = find_record(caller, record_id, lock=True)
    for name, value in changes.items():
        setattr(record, name, value)
    record.updated_at = utcnow()
    try:
        approval.before_commit(record, caller.id)
    except BaseException:
        db.session.rollback()
        raise
    db.session.commit()
    return record


def replace_content(
    caller: Caller, record_id: uuid.UUID, staged: StagedFile, storage: Storage
) -> FileRecord:
    """Point the record at its new object, commit, and only then remove the old object."""
    try:
        record = find_record(caller, record_id, lock=True)
        old_key = record.stored_path
        for name, value in _content_columns(staged).items():
            setattr(record, name, value)
        record.updated_at = utcnow()
        approval.before_commit(record, caller.id)
        db.session.add(PendingObjectDeletion(key=old_key))
        db.session.commit()
    except BaseException:
        db.session.rollback()
        discard([staged], storage)
        raise
    delete_orphaned_object(storage, old_key)
    return record


def delete_record(caller: Caller, record_id: uuid.UUID, storage: Storage) -> None:
    """Remove the row first; the object follows once nothing points at it any more.

    The bucket is asked first, so that while it is unreachable the delete is refused (503)
    and nothing changes, rather than the row going while its object stays.
    """
    record = find_record(caller, record_id, lock=True)
    key = record.stored_path
    storage.exists(key)
    approval.before_delete(record, caller.id)
    db.session.delete(record)
    db.session.add(PendingObjectDeletion(key=key))
    db.session.commit()
    if delete_orphaned_object(storage, key):
        retry_pending_deletions(storage, limit=RETRIES_PER_REQUEST)


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
