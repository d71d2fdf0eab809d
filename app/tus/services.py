"""Resumable uploads: creation, pieces at an offset, completion into a record, termination.

An upload ends in exactly the pipeline of `POST /api/files`: the same metadata schema and
messages (checked at creation, before any byte is accepted), the same size limit, the same
type detection and the same record creation (`app.files.writes.create_records`). Its state
lives in the database (`ResumableUpload`) and in the storage backend
(`app.storage.resumable`), never only in this process.

One request at a time writes an upload: a PATCH first claims the upload's row with a
conditional UPDATE (committed before any byte moves, so it holds across threads, processes
and replicas and on SQLite as on PostgreSQL); a request that finds it claimed gets 409, as
for any other offset it cannot know yet. A claim expires after `CLAIM_SECONDS`, so a process
that died holding one blocks its upload only that long. Completion marks the upload complete
in the commit that inserts the record, on the condition that the claim is still this
request's: it runs exactly once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete as sa_delete
from sqlalchemy import func, or_, select, update
from sqlalchemy.exc import SQLAlchemyError

from app.auth.services import Caller
from app.database import lock_database_on_sqlite
from app.detection.sample import HEAD_BYTES, TAIL_BYTES, Sample
from app.exceptions import RecordNotFound
from app.extensions import db
from app.files import relations, writes
from app.files.uploads import StagedFile, check_file, discard
from app.files.validation import validated
from app.models import FileRecord, ResumableUpload, User, utcnow
from app.schemas.records import CreateMetadataSchema
from app.storage import Storage, StorageError
from app.storage.resumable import PREFIX as PIECES_PREFIX
from app.storage.resumable import ResumableStore, State, resumable_store
from app.tus import hashing
from app.tus.pieces import Piece

# CHECKSUMS, EXTENSIONS and TUS_VERSION: named as `services.X` where the operations are
# declared (routes.py, api_doc.py).
from app.tus.protocol import CHECKSUMS as CHECKSUMS
from app.tus.protocol import EXTENSIONS as EXTENSIONS
from app.tus.protocol import (
    FILE_FIELD,
    OffsetMismatch,
    TooLarge,
    TooManyUploads,
    UploadGone,
    file_name,
    parse_metadata,
)
from app.tus.protocol import TUS_VERSION as TUS_VERSION

log = logging.getLogger(__name__)

#: Longer than any one piece's I/O may take (a 200 MiB body into S3); a process that died
#: while holding a claim blocks its upload this long.
CLAIM_SECONDS = 300

#: The metadata rules of `POST /api/files`, applied to `Upload-Metadata`.
create_schema = CreateMetadataSchema()


def find_upload(user: Caller, upload_id: uuid.UUID) -> ResumableUpload:
    """The caller's own upload (administrators too see only their own); an expired one is
    gone (410) even before `storage reconcile --fix` has removed it."""
    upload = db.session.scalars(
        select(ResumableUpload).where(
            ResumableUpload.id == upload_id, ResumableUpload.user_id == user.id
        )
    ).first()
    if upload is None:
        raise RecordNotFound()
    if upload.completed_at is None and upload.expires_at <= utcnow():
        raise UploadGone("This upload has expired.")
    return upload


def _check_room_for_another(user: Caller, config: Any) -> None:
    """At most `UPLOAD_MAX_UNFINISHED` unfinished uploads per user, each holding up to the
    file size limit in storage until it expires. Only a check: `_hold_room` makes it hold
    until the commit."""
    now = utcnow()
    unfinished, first_expiry = db.session.execute(
        select(func.count(), func.min(ResumableUpload.expires_at)).where(
            ResumableUpload.user_id == user.id,
            ResumableUpload.completed_at.is_(None),
            ResumableUpload.expires_at > now,
        )
    ).one()
    if unfinished >= config["UPLOAD_MAX_UNFINISHED"]:
        # Without a new piece, the oldest of them expires by then and frees its place.
        wait = max(1, int((first_expiry - now).total_seconds()) + 1)
        raise TooManyUploads(
            f"You have {unfinished} unfinished uploads, the most allowed: finish or terminate "
            "(DELETE) one of them before starting another.",
            headers={"Retry-After": str(wait)},
        )


def _hold_room(user: Caller, config: Any) -> None:
    """`_check_room_for_another` again, with the user's creations serialised until the
    commit: PostgreSQL locks the user's row (FOR NO KEY UPDATE, which leaves inserts that
    refer to it alone), SQLite takes its write lock. Two creations at once then count one
    after the other, and the second sees the first's upload."""
    lock_database_on_sqlite(db.session)
    db.session.execute(
        select(User.id).where(User.id == user.id).with_for_update(key_share=True)
    ).first()
    _check_room_for_another(user, config)


def create_upload(
    user: Caller, length: int, metadata_header: str, storage: Storage, config: Any
) -> ResumableUpload:
    """Check everything `POST /api/files` checks before the bytes, then start the upload."""
    max_size = config["MAX_FILE_SIZE"]
    if length > max_size:
        raise TooLarge(
            f"The {FILE_FIELD} field must not be greater than {max_size // 1024} kilobytes."
        )
    fields, field_errors = parse_metadata(metadata_header)
    empty = f"The {FILE_FIELD} field must not be an empty file."
    loaded = validated(
        create_schema,
        fields,
        unreadable=field_errors,
        files=[StagedFile(0, FILE_FIELD, "", error=empty)] if length == 0 else None,
        file_field=FILE_FIELD,
    )
    # A series or linked record that is not there fails now, not after the bytes.
    relations.check_references(loaded, user)
    # Checked first too, so that a user at the limit costs the backend nothing.
    _check_room_for_another(user, config)
    now = utcnow()
    record_id, upload_id = uuid.uuid4(), uuid.uuid4()
    key = writes.new_object_key(record_id)
    # No transaction stays open while the backend is asked.
    db.session.rollback()
    store = resumable_store(storage)
    state = store.begin(str(upload_id), key)
    upload = ResumableUpload(
        id=upload_id,
        user_id=user.id,
        record_id=record_id,
        stored_path=key,
        upload_metadata=metadata_header,
        length=length,
        offset=0,
        storage_state=json.dumps(state),
        created_at=now,
        expires_at=now + timedelta(hours=config["UPLOAD_EXPIRY_HOURS"]),
    )
    try:
        _hold_room(user, config)
        db.session.add(upload)
        db.session.commit()
    except BaseException:
        db.session.rollback()
        store.abort(str(upload_id), key, state)
        raise
    return upload


# --- one writer at a time -----------------------------------------------------------------


def _busy(offset: int) -> OffsetMismatch:
    return OffsetMismatch(
        f"Another request is writing this upload at offset {offset}; ask for the offset "
        "with HEAD and go on from there."
    )


def _claim(upload: ResumableUpload, offset: int) -> uuid.UUID:
    """Make this request the upload's only writer at `offset`, committed before any byte
    moves; the loser of a race learns it here (409), having changed nothing."""
    claim, now = uuid.uuid4(), utcnow()
    claimed = db.session.execute(
        update(ResumableUpload)
        .where(
            ResumableUpload.id == upload.id,
            ResumableUpload.completed_at.is_(None),
            ResumableUpload.offset == offset,
            or_(ResumableUpload.claimed_until.is_(None), ResumableUpload.claimed_until < now),
        )
        .values(claim=claim, claimed_until=now + timedelta(seconds=CLAIM_SECONDS))
        .execution_options(synchronize_session=False)
    ).rowcount
    db.session.commit()
    if claimed != 1:
        raise _busy(offset)
    return claim


def _mine(upload_id: uuid.UUID, claim: uuid.UUID) -> Any:
    return update(ResumableUpload).where(
        ResumableUpload.id == upload_id, ResumableUpload.claim == claim
    )


def _release(upload_id: uuid.UUID, claim: uuid.UUID) -> None:
    """Give the claim up after a failure; if even that fails, it expires."""
    try:
        db.session.rollback()
        db.session.execute(
            _mine(upload_id, claim)
            .values(claim=None, claimed_until=None)
            .execution_options(synchronize_session=False)
        )
        db.session.commit()
    except SQLAlchemyError:
        db.session.rollback()
        log.warning("could not release the claim on upload %s", upload_id)


def check_piece(
    user: Caller, upload_id: uuid.UUID, offset: int, size: int | None
) -> ResumableUpload:
    """The upload a piece of `size` bytes (if announced) at `offset` may go to; run before
    the body is read, here and by the server before it receives a large body."""
    upload = find_upload(user, upload_id)
    if upload.completed_at is not None or offset != upload.offset:
        raise OffsetMismatch(f"Upload-Offset is {upload.offset}, not {offset}.")
    if size is not None and size > upload.length - upload.offset:
        raise TooLarge(f"The upload has room for {upload.length - upload.offset} more bytes.")
    return upload


@dataclass
class Appended:
    upload: ResumableUpload
    record: FileRecord | None


def append_piece(
    user: Caller, upload_id: uuid.UUID, offset: int, piece: Piece, storage: Storage, config: Any
) -> Appended:
    """Store the piece at `offset` and commit the new offset; the last piece completes the
    upload into a record. Lookup, offset and announced size are checked before the body is
    read, and the claim is taken before the backend is touched."""
    upload = check_piece(user, upload_id, offset, piece.announced)
    piece.start(upload)
    claim = _claim(upload, offset)
    store, old_state = resumable_store(storage), json.loads(upload.storage_state)
    try:
        try:
            state = store.append(
                str(upload_id), upload.stored_path, old_state, offset, piece, upload.length
            )
            end = offset + piece.size
            values: dict[str, Any] = {
                "storage_state": json.dumps(state),
                "offset": end,
                "expires_at": utcnow() + timedelta(hours=config["UPLOAD_EXPIRY_HOURS"]),
            }
            if end < upload.length:
                values.update(claim=None, claimed_until=None)
            if piece.size or end < upload.length:
                kept = db.session.execute(
                    _mine(upload_id, claim)
                    .values(**values)
                    .execution_options(synchronize_session=False)
                ).rowcount
                db.session.commit()
                if kept != 1:  # the claim expired and another request took it
                    raise _busy(offset)
        finally:
            # The running SHA-256 may still be hashing beside the fsync and the commit.
            digest = piece.finish()
        if piece.size:
            hashing.digests.keep(upload_id, end, digest)
    except BaseException:
        _release(upload_id, claim)
        raise
    _settle(store, str(upload_id), old_state, state)
    db.session.refresh(upload)
    if end < upload.length:
        return Appended(upload, None)
    return Appended(upload, complete(upload, claim, storage, config))


def _settle(store: ResumableStore, upload_id: str, old: State, new: State) -> None:
    """Pieces the committed state no longer names go; left over, they go at completion."""
    try:
        store.settle(upload_id, old, new)
    except StorageError:
        log.warning("could not remove merged pieces of upload %s", upload_id, exc_info=True)


def _sample(storage: Storage, key: str, size: int) -> Sample:
    with storage.open(key, 0, HEAD_BYTES - 1) as reader:
        head = reader.read_all()
    with storage.open(key, max(0, size - TAIL_BYTES), size - 1) as reader:
        tail = reader.read_all()
    return Sample(head=head, tail=tail, size=size)


def _sha256(storage: Storage, key: str) -> str:
    digest = hashlib.sha256()
    with storage.open(key) as reader:
        for chunk in reader:
            digest.update(chunk)
    return digest.hexdigest()


class _ClaimLost(Exception):
    """Another request owns the upload now; whatever it does, this one must not undo."""


def complete(
    upload: ResumableUpload, claim: uuid.UUID, storage: Storage, config: Any
) -> FileRecord:
    """Hand the finished object to the record pipeline of `POST /api/files`, holding the
    claim. Whatever fails from here on (a refused type or metadata, storage or database
    gone) leaves nothing behind: no object, no upload; the client starts again. The clean-up
    never removes an object that a committed record names."""
    # Read now: after a rollback the row may be unreadable.
    upload_id, record_id, length = upload.id, upload.record_id, upload.length
    try:
        resumable_store(storage).complete(
            str(upload_id), upload.stored_path, json.loads(upload.storage_state)
        )
    except BaseException:
        # The pieces are still there: an empty PATCH at the end offset tries again.
        _release(upload_id, claim)
        raise
    digest = hashing.digests.at(upload_id, length)
    hashing.digests.keep(upload_id, 0, None)
    fields, field_errors = parse_metadata(upload.upload_metadata)
    staged = StagedFile(0, FILE_FIELD, file_name(fields), size=length)
    staged.key = upload.stored_path
    try:
        check_file(
            staged,
            lambda: _sample(storage, upload.stored_path, length),
            config["MAX_FILE_SIZE"],
        )
        if staged.error is None:
            staged.sha256 = (
                digest.hexdigest() if digest is not None else _sha256(storage, upload.stored_path)
            )
        metadata = validated(
            create_schema, fields, unreadable=field_errors, files=[staged], file_field=FILE_FIELD
        )
        # Complete in the commit that inserts the record, and only while the claim is ours.
        completed = db.session.execute(
            _mine(upload_id, claim)
            .where(ResumableUpload.completed_at.is_(None))
            .values(completed_at=utcnow(), claim=None, claimed_until=None)
            .execution_options(synchronize_session=False)
        ).rowcount
        if completed != 1:
            raise _ClaimLost()
        [record] = writes.create_records(upload.user_id, [(record_id, staged)], metadata, storage)
    except _ClaimLost:
        db.session.rollback()
        if db.session.get(ResumableUpload, upload_id) is None:
            # Terminated while completing: nobody else will name the object.
            _clean_up_failed(upload_id, record_id, staged, storage)
        db.session.rollback()
        raise _busy(length) from None
    except BaseException:
        db.session.rollback()
        _clean_up_failed(upload_id, record_id, staged, storage)
        raise
    db.session.refresh(upload)
    return record


def _clean_up_failed(
    upload_id: uuid.UUID, record_id: uuid.UUID, staged: StagedFile, storage: Storage
) -> None:
    """Remove the object and the row of an upload whose completion failed, unless a record
    holds them (then they are the record's, not this request's to remove); if the database
    cannot tell, reconciliation removes them once they expire."""
    try:
        if db.session.get(FileRecord, record_id) is not None:
            db.session.rollback()
            return
        discard([staged], storage)
        db.session.execute(
            sa_delete(ResumableUpload).where(
                ResumableUpload.id == upload_id, ResumableUpload.completed_at.is_(None)
            )
        )
        db.session.commit()
    except SQLAlchemyError:
        db.session.rollback()
        log.warning("could not remove the row of failed upload %s", upload_id)


def terminate(user: Caller, upload_id: uuid.UUID, storage: Storage) -> None:
    """Remove the upload, then its pieces; a finished upload's record stays. A request still
    writing the upload finds its claim gone and keeps nothing (what it stored after the
    removal is an orphan for `storage reconcile --fix`)."""
    upload = find_upload(user, upload_id)
    unfinished = upload.completed_at is None
    key, state = upload.stored_path, json.loads(upload.storage_state)
    db.session.execute(
        sa_delete(ResumableUpload)
        .where(ResumableUpload.id == upload_id)
        .execution_options(synchronize_session=False)
    )
    db.session.commit()
    hashing.digests.keep(upload_id, 0, None)
    if unfinished:
        try:
            resumable_store(storage).abort(str(upload_id), key, state)
        except StorageError:
            log.warning("could not remove the pieces of terminated upload %s", upload_id)


def discard_new(upload_id: uuid.UUID, storage: Storage) -> None:
    """Remove an upload whose creation request failed after it was created (its first piece
    was refused), so that no upload is left whose location its client never learnt."""
    db.session.rollback()
    upload = db.session.get(ResumableUpload, upload_id)
    if upload is None or upload.completed_at is not None:
        db.session.rollback()
        return
    try:
        resumable_store(storage).abort(
            str(upload.id), upload.stored_path, json.loads(upload.storage_state)
        )
        db.session.delete(upload)
        db.session.commit()
    except (StorageError, SQLAlchemyError):
        db.session.rollback()
        log.warning("could not remove upload %s after its creation failed", upload_id)


def abort_expired(storage: Storage, now: datetime) -> tuple[int, int]:
    """Remove uploads past their expiry: the pieces of unfinished ones and the rows of all
    (finished ones only keep their record id for a late HEAD). Returns (aborted, failed)."""
    store = resumable_store(storage)
    expired = db.session.scalars(
        select(ResumableUpload).where(ResumableUpload.expires_at < now)
    ).all()
    aborted = failed = 0
    for upload in expired:
        try:
            if upload.completed_at is None:
                store.abort(str(upload.id), upload.stored_path, json.loads(upload.storage_state))
                aborted += 1
        except StorageError:
            failed += 1
            continue
        db.session.delete(upload)
        db.session.commit()
    return aborted, failed


def remove_orphaned_pieces(storage: Storage, older_than: datetime) -> int:
    """Remove pieces (`uploads/<id>/...`) whose upload row is gone, e.g. with its user's
    account; the multipart uploads of such rows are left to `remove_abandoned_uploads`."""
    removed = 0
    for obj in list(storage.iter_objects(f"{PIECES_PREFIX}/")):
        name = obj.key.split("/")[1]
        try:
            upload_id = uuid.UUID(name)
        except ValueError:
            upload_id = None
        if obj.modified >= older_than:
            continue
        if upload_id is not None and db.session.get(ResumableUpload, upload_id) is not None:
            continue
        storage.delete(obj.key)
        removed += 1
    db.session.rollback()
    return removed


def live_keys() -> set[str]:
    """Object keys of unfinished uploads, whose multipart uploads must be left alone."""
    return set(
        db.session.scalars(
            select(ResumableUpload.stored_path).where(ResumableUpload.completed_at.is_(None))
        )
    )
