"""Changes of file records: create, update, replace and delete, with their storage side effects.

Functions here take plain values (the caller, ids, staged files, loaded metadata) and raise
domain errors; they know nothing of HTTP. Storage side effects follow one order: objects are
stored before the rows that point at them are committed, and removed only after the rows
that pointed at them are gone (the `pending_object_deletions` outbox keeps what is owed).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import delete as sa_delete
from sqlalchemy import select

from app.auth.services import Caller
from app.doi import services as doi_services
from app.extensions import db
from app.files import approval, versions
from app.files.access import find_record
from app.files.uploads import StagedFile, discard
from app.models import FileRecord, FileVersion, PendingObjectDeletion, ReleaseRequest, utcnow
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
            # The release rule first: what it leaves is what the public may see.
            approval.before_commit(record, owner_id, new=True)
            versions.note_public(record)
            doi_services.follow(record)
        db.session.commit()
    except BaseException:
        db.session.rollback()
        discard([staged for _, staged in files], storage)
        raise
    return records


def update_metadata(
    caller: Caller,
    record_id: uuid.UUID,
    changes: dict[str, Any],
    if_match: Collection[str] | None = None,
    storage: Storage | None = None,
) -> FileRecord:
    """Change the metadata; `if_match` (entity tags, None: unconditional) must name the record
    as it is, or nothing changes (412). Pending bytes the change drops (approval.py) are
    deleted from `storage` after the commit (without it, they stay owed)."""
    record = find_record(caller, record_id, lock=True)
    versions.check_if_match(if_match, record)
    versions.note_public(record)  # a change may end a public moment: mark it first
    for name, value in changes.items():
        setattr(record, name, value)
    record.updated_at = utcnow()
    try:
        # The release rule first: what it leaves is what the public may see.
        approval.before_commit(record, caller.id, touched=changes.keys())
    except BaseException:
        approval.take_discarded()
        db.session.rollback()
        raise
    versions.note_public(record)
    doi_services.follow(record)
    discarded = approval.take_discarded()
    db.session.commit()
    if storage is not None:
        for key in discarded:
            delete_orphaned_object(storage, key)
    return record


def replace_content(
    caller: Caller,
    record_id: uuid.UUID,
    staged: StagedFile,
    storage: Storage,
    *,
    change_note: str | None = None,
    if_match: Collection[str] | None = None,
) -> FileRecord:
    """Make `staged` the record's next version, commit, and only then remove the old content
    (unless it is kept, versions.py). Identical bytes change nothing: the staged object is
    removed and the record stays as it was. `if_match` as for `update_metadata`. With
    RELEASE_APPROVAL on, a released record's new bytes wait for approval under their own key
    (approval.py `hold_content`) and the record stays as the public sees it."""
    owed: list[str] = []
    held = True
    try:
        record = find_record(caller, record_id, lock=True)
        versions.check_if_match(if_match, record)
        if approval.holds_changes(record):
            content = approval.PendingContent(
                id=record.id, change_note=change_note, **_pending_columns(staged)
            )
            held = approval.hold_content(record, caller.id, content)
            owed = approval.take_discarded()
            db.session.commit()
        elif record.checksum_sha256 == staged.sha256:
            db.session.rollback()
            discard([staged], storage)
            return find_record(caller, record_id)
        else:
            now = utcnow()
            owed = _next_version(record, _content_columns(staged), now, caller.id, change_note)
            approval.before_commit(record, caller.id)
            versions.note_public(record)
            doi_services.follow(record)
            db.session.commit()
    except BaseException:
        approval.take_discarded()
        db.session.rollback()
        discard([staged], storage)
        raise
    if not held:
        discard([staged], storage)
    for key in owed:
        delete_orphaned_object(storage, key)
    return record


def _pending_columns(staged: StagedFile) -> dict[str, Any]:
    return {
        "stored_path": staged.key,
        "checksum_sha256": staged.sha256,
        "size": staged.size,
        "mime_type": staged.mime_type,
        "original_name": staged.original_name,
    }


def _next_version(
    record: FileRecord, columns: dict[str, Any], at: Any, by: int | None, note: str | None
) -> list[str]:
    """Make `columns` (a content's) the record's next version; the ended content's key is
    returned (and owed) unless the version keeps it (versions.py)."""
    ended = versions.end_version(record, at, by, note)
    owed = []
    if ended.stored_path is None:
        owed.append(record.stored_path)
        db.session.add(PendingObjectDeletion(key=record.stored_path))
    for name, value in columns.items():
        setattr(record, name, value)
    record.version += 1
    record.updated_at = at
    record.content_was_public = False
    return owed


def apply_approved_change(record: FileRecord, request: ReleaseRequest) -> list[str]:
    """Swap a held change (approval.py) into its locked, released record, as a replacement
    and a PATCH would have: the content first (a new version, made by the submitter, if the
    bytes differ), then the public fields. Returns the keys to delete after the commit (owed
    in this transaction)."""
    now = utcnow()
    owed: list[str] = []
    content = approval.wanted_content(request)
    if content is not None:
        if content.checksum_sha256 == record.checksum_sha256:
            owed.append(content.stored_path)
            db.session.add(PendingObjectDeletion(key=content.stored_path))
        else:
            columns = {
                "original_name": content.original_name,
                "stored_path": content.stored_path,
                "checksum_sha256": content.checksum_sha256,
                "mime_type": content.mime_type,
                "size": content.size,
            }
            owed += _next_version(record, columns, now, request.submitted_by, content.change_note)
    for name, value in approval.wanted_fields(request).items():
        setattr(record, name, value)
    record.updated_at = now
    return owed


def delete_record(caller: Caller, record_id: uuid.UUID, storage: Storage) -> None:
    """Remove the row first (with its versions' rows); the objects (the current content and
    every kept version's) follow once nothing points at them any more.

    The bucket is asked first, so that while it is unreachable the delete is refused (503)
    and nothing changes, rather than the row going while its object stays.
    """
    record = find_record(caller, record_id, lock=True)
    keys = [record.stored_path, *versions.kept_keys(record_id)]
    storage.exists(keys[0])
    approval.before_delete(record, caller.id)
    dropped = approval.take_discarded()  # pending bytes, owed by the request's cancellation
    doi_services.follow(record, deleted=True)
    db.session.execute(sa_delete(FileVersion).where(FileVersion.record_id == record_id))
    db.session.delete(record)
    db.session.add_all(PendingObjectDeletion(key=key) for key in keys)
    db.session.commit()
    if all([delete_orphaned_object(storage, key) for key in keys + dropped]):
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
