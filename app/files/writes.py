"""Changes of file records: create, update, replace and delete, with their storage side effects,
and the one pipeline every write of a record ends through (`_finish`).

Functions here take plain values (the caller, ids, staged files, loaded metadata) and raise
domain errors; they know nothing of HTTP. Storage side effects follow one order: objects are
stored before the rows that point at them are committed, and removed only after the rows
that pointed at them are gone (app/files/deletions.py keeps what is owed).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Sequence
from typing import Any

from sqlalchemy import delete as sa_delete
from sqlalchemy import inspect

from app.auth.services import Caller
from app.covers import services as covers
from app.doi import services as doi_services
from app.extensions import db
from app.files import approval, deletions, relations, versions
from app.files.access import find_record
from app.files.uploads import StagedFile, discard
from app.models import FileRecord, FileVersion, User, utcnow
from app.schemas.attribution import in_step
from app.storage import Storage

log = logging.getLogger(__name__)


def new_object_key(record_id: uuid.UUID) -> str:
    """A fresh key per content version; never derived from names or the virtual path."""
    return f"files/{record_id}/{uuid.uuid4()}"


def finish(
    records: Sequence[FileRecord],
    storage: Storage,
    step: Callable[[FileRecord], Any],
    *,
    deleted: bool = False,
) -> None:
    """The one ending of every write of records (create, PATCH, replacement, tus, import,
    delete, approval), in the one order: for each record its write's `step` (which puts the
    changes in place through the release rule, app/files/approval.py), the public moments
    noted before and after it (versions.py), its DOI followed (app/doi) with what the public
    saw before, its covers followed (app/covers: new ones due, old ones owed); then one
    commit, and only then the deletions the write owes. On any failure the transaction is
    rolled back and nothing is owed."""
    try:
        for record in records:
            existing = inspect(record).persistent
            if existing:  # a change may end a public moment: mark it first
                versions.note_public(record)
            seen = doi_services.public_view(record) if existing else None
            step(record)
            related = relations.index(record, deleted=deleted)
            versions.note_public(record)
            doi_services.follow(record, deleted=deleted, seen=seen)
            covers.follow(record, deleted=deleted)
            # What others show of it (their links' inverse) may have changed.
            doi_services.follow_related(related)
        owed = deletions.take_owed()
        db.session.commit()
    except BaseException:
        deletions.take_owed()
        db.session.rollback()
        raise
    if deletions.carry_out(storage, owed) and deleted:
        deletions.retry(storage, limit=deletions.RETRIES_PER_REQUEST)


def writer(user_id: int) -> Caller:
    """The account `user_id` as the writer of a record it owns (an upload, tus, an import)."""
    user = db.session.get(User, user_id)
    return Caller(token_id=0, id=user_id, is_admin=bool(user and user.is_admin))


def create_records(
    owner_id: int,
    files: Sequence[tuple[uuid.UUID, StagedFile]],
    metadata: dict[str, Any],
    storage: Storage,
) -> list[FileRecord]:
    """Insert one record per stored file (record id, staged file), all or none, committing
    whatever else the session holds in the same transaction; on failure no object stays
    behind. What the metadata names (a series, linked records) must exist for the owner."""
    now = utcnow()
    records = [
        FileRecord(
            id=record_id,
            user_id=owner_id,
            created_at=now,
            updated_at=now,
            **versions.content_of(staged),
            **metadata,
        )
        for record_id, staged in files
    ]
    try:
        relations.check_references(metadata, writer(owner_id))
        db.session.add_all(records)
        finish(records, storage, lambda record: approval.create(record, owner_id))
    except BaseException:
        discard([staged for _, staged in files], storage)
        raise
    return records


def update_metadata(
    caller: Caller,
    record_id: uuid.UUID,
    changes: dict[str, Any],
    if_match: Collection[str] | None,
    storage: Storage,
) -> FileRecord:
    """Change the metadata; `if_match` (entity tags, None: unconditional) must name the record
    as it is, or nothing changes (412). Bytes the change drops (a draft's) are deleted from
    `storage` after the commit."""
    record = find_record(caller, record_id, lock=True)
    versions.check_if_match(if_match, record)

    def step(record: FileRecord) -> None:
        # What its editors see: the draft of a waiting change, else the record.
        current = approval.draft_of(record.id) or record
        settled = in_step(changes, current)
        relations.check_references(settled, caller, current, record.id)
        if approval.update(record, settled, caller.id):
            record.updated_at = utcnow()

    finish([record], storage, step)
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
    RELEASE_APPROVAL on, a released record's new bytes wait in its draft (approval.py) and
    the record stays as the public sees it."""
    used = []
    try:
        record = find_record(caller, record_id, lock=True)
        versions.check_if_match(if_match, record)
        finish(
            [record],
            storage,
            lambda record: used.append(approval.replace(record, staged, caller.id, change_note)),
        )
    except BaseException:
        discard([staged], storage)
        raise
    if not used[0]:
        discard([staged], storage)
    return record


def delete_record(caller: Caller, record_id: uuid.UUID, storage: Storage) -> None:
    """Remove the row first (with its versions' rows); the objects (the current content and
    every kept version's) follow once nothing points at them any more.

    The bucket is asked first, so that while it is unreachable the delete is refused (503)
    and nothing changes, rather than the row going while its object stays.
    """
    record = find_record(caller, record_id, lock=True)
    storage.exists(record.stored_path)

    def step(record: FileRecord) -> None:
        approval.delete(record, caller.id)
        for key in [record.stored_path, *versions.kept_keys(record_id)]:
            deletions.owe(key)
        db.session.execute(sa_delete(FileVersion).where(FileVersion.record_id == record_id))
        db.session.delete(record)

    finish([record], storage, step, deleted=True)
