"""Resumable uploads: creation, pieces at an offset, completion into a record, termination.

An upload ends in exactly the pipeline of `POST /api/files`: the same metadata schema and
messages (checked at creation, before any byte is accepted), the same size limit, the same
type detection and the same record creation (`app.files.writes.create_records`). Its state
lives in the database (`ResumableUpload`) and in the storage backend
(`app.storage.resumable`), never only in this process.
"""

from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import json
import logging
import os
import stat
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, BinaryIO

from sqlalchemy import delete as sa_delete
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from app.auth.services import Caller
from app.detection.sample import HEAD_BYTES, TAIL_BYTES, Sample
from app.exceptions import DomainError, RecordNotFound
from app.extensions import db
from app.files import writes
from app.files.uploads import StagedFile, check_file, clean_file_name, discard
from app.files.validation import validated
from app.models import FileRecord, ResumableUpload, utcnow
from app.schemas.records import CreateMetadataSchema
from app.storage import Storage, StorageError
from app.storage.resumable import PREFIX as PIECES_PREFIX
from app.storage.resumable import resumable_store

log = logging.getLogger(__name__)

TUS_VERSION = "1.0.0"
EXTENSIONS = "creation,creation-with-upload,termination,checksum,expiration"
CHECKSUMS: dict[str, Callable[[], Any]] = {"sha1": hashlib.sha1, "sha256": hashlib.sha256}
#: The field name of the file in error messages, as for a content replacement.
FILE_FIELD = "file"

#: The metadata rules of `POST /api/files`, applied to `Upload-Metadata`.
create_schema = CreateMetadataSchema()


class TusError(DomainError):
    """A request the protocol answers with a status of its own."""

    status = 400


class OffsetMismatch(TusError):
    status = 409


class UploadGone(TusError):
    status = 410


class TooLarge(TusError):
    status = 413


class ChecksumMismatch(TusError):
    status = 460


class UnsupportedChecksum(TusError):
    status = 400


class UnsupportedMediaType(TusError):
    status = 415


# --- Upload-Metadata ----------------------------------------------------------------------


def parse_metadata(header: str) -> tuple[dict[str, str], dict[str, list[str]]]:
    """`key base64(value)` pairs, comma-separated; a value that is not UTF-8 is a field error
    with the message of a form field that is not UTF-8."""
    fields: dict[str, str] = {}
    errors: dict[str, list[str]] = {}
    for pair in filter(None, (p.strip() for p in header.split(","))):
        key, _, encoded = pair.partition(" ")
        try:
            raw = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise TusError(f"Upload-Metadata: the value of {key!r} is not base64.") from None
        try:
            fields[key] = raw.decode("utf-8")
        except UnicodeDecodeError:
            errors[key] = [f"The {key} field must be UTF-8 text."]
    return fields, errors


def file_name(fields: dict[str, str]) -> str:
    """tus-js-client and Uppy send `filename` (Uppy also `name`)."""
    return clean_file_name(fields.get("filename") or fields.get("name"))


# --- SHA-256 of the whole file, carried along while this process sees every piece ---------


class _Digests:
    """The running SHA-256 of uploads this process has seen every piece of, by upload id and
    offset. Only a shortcut: when a piece went to another replica or the process restarted,
    completion reads the stored object once more instead."""

    KEPT = 256

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[uuid.UUID, tuple[int, Any]] = OrderedDict()

    def at(self, upload_id: uuid.UUID, offset: int) -> Any | None:
        with self._lock:
            item = self._items.get(upload_id)
        if offset == 0:
            return hashlib.sha256()
        return item[1].copy() if item is not None and item[0] == offset else None

    def keep(self, upload_id: uuid.UUID, offset: int, digest: Any | None) -> None:
        with self._lock:
            self._items.pop(upload_id, None)
            if digest is not None:
                self._items[upload_id] = (offset, digest)
                while len(self._items) > self.KEPT:
                    self._items.popitem(last=False)


digests = _Digests()


# --- the upload's life --------------------------------------------------------------------


def find_upload(user: Caller, upload_id: uuid.UUID, *, lock: bool = False) -> ResumableUpload:
    """The caller's own upload (administrators too see only their own); an expired one is
    gone (410) even before `storage reconcile --fix` has removed it."""
    statement = select(ResumableUpload).where(
        ResumableUpload.id == upload_id, ResumableUpload.user_id == user.id
    )
    if lock:
        statement = statement.with_for_update()
    upload = db.session.scalars(statement).first()
    if upload is None:
        raise RecordNotFound()
    if upload.completed_at is None and upload.expires_at <= utcnow():
        raise UploadGone("This upload has expired.")
    return upload


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
    validated(
        create_schema,
        fields,
        unreadable=field_errors,
        files=[StagedFile(0, FILE_FIELD, "", error=empty)] if length == 0 else None,
        file_field=FILE_FIELD,
    )
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
        db.session.add(upload)
        db.session.commit()
    except BaseException:
        db.session.rollback()
        store.abort(str(upload_id), key, state)
        raise
    return upload


class Piece:
    """A request body on its way into storage: read once, counted, checked against the room
    left in the upload, hashed for `Upload-Checksum` and for the file's SHA-256.

    Two ways in, both calling `verify()` before the backend keeps anything, so a body that
    breaks a rule leaves the upload as it was:
    - `chunks()`: the body in chunks, hashed beside the backend's writes (S3, and bodies the
      server kept in memory);
    - `write_to(fd, offset)`: the local backend. A body the server spooled to a file (waitress
      does for every body over 512 KiB) is copied into the append file by the kernel
      (`copy_file_range`, no copy through Python), after its size was checked against the
      room left; it is then hashed from the spool in a thread while the backend `fsync`s and
      the caller commits the offset. `verify()` waits for that hash only when the body has an
      `Upload-Checksum`; the running SHA-256 is collected by `finish()` after the commit.
    """

    READ_SIZE = 1024 * 1024

    def __init__(
        self,
        stream: BinaryIO,
        upload_id: uuid.UUID,
        checksum: tuple[str, bytes] | None,
        spooled: Spooled | None = None,
    ) -> None:
        self.stream = stream
        self.upload_id = upload_id
        self.checksum = checksum
        self.spooled = spooled
        self.size = 0
        self.room = 0
        self.digest: Any | None = None
        self._check: Any | None = None
        self._hashing: Future[None] | None = None

    def start(self, upload: ResumableUpload) -> None:
        self.room = upload.length - upload.offset
        self.digest = digests.at(upload.id, upload.offset)

    def _hashes(self) -> list[Any]:
        self._check = CHECKSUMS[self.checksum[0]]() if self.checksum else None
        return [h for h in (self.digest, self._check) if h is not None]

    def _too_large(self) -> TooLarge:
        return TooLarge(f"The upload has room for {self.room} more bytes.")

    def chunks(self) -> Iterator[bytes]:
        """The body in chunks; each is hashed in a thread of its own while the backend stores
        it (hashlib lets go of the GIL), which `verify` waits for."""
        hashes = self._hashes()
        while chunk := self.stream.read(self.READ_SIZE):
            self.size += len(chunk)
            if self.size > self.room:
                self._settle()
                raise self._too_large()
            self._settle()
            if hashes:
                self._hashing = _hash_pool().submit(_update, hashes, chunk)
            yield chunk
        self._settle()

    def write_to(self, fd: int, offset: int) -> None:
        """The whole body written at `offset` of the open file `fd` (not synced)."""
        spooled = self.spooled
        if spooled is None:
            for chunk in self.chunks():
                _write_all(fd, chunk, offset + self.size - len(chunk))
            return
        if spooled.size > self.room:
            raise self._too_large()
        _copy(spooled.fd, spooled.start, fd, offset, spooled.size)
        self.size = spooled.size
        hashes = self._hashes()
        if hashes:
            # A descriptor of its own: the server closes the spool when the request ends.
            source = os.dup(spooled.fd)
            self._hashing = _hash_pool().submit(
                _hash_file, hashes, source, spooled.start, spooled.size
            )

    def _settle(self) -> None:
        if self._hashing is not None:
            hashing, self._hashing = self._hashing, None
            hashing.result()

    def verify(self) -> None:
        if self._check is None:
            return
        self._settle()
        if self._check.digest() != self.checksum[1]:  # type: ignore[index]
            raise ChecksumMismatch("The Upload-Checksum does not match the body.")

    def finish(self) -> Any | None:
        """The running SHA-256 including this piece, or None when it is not known (the hash
        failed, or this process did not see the earlier pieces)."""
        try:
            self._settle()
        except Exception:
            log.warning("hashing a piece of upload %s failed", self.upload_id, exc_info=True)
            self.digest = None
        return self.digest


@dataclass(frozen=True)
class Spooled:
    """A request body the server holds whole in a file: its descriptor, where the body
    starts in it and its size."""

    fd: int
    start: int
    size: int


def spooled_body(environ: dict[str, Any]) -> Spooled | None:
    """The body as waitress spooled it, when it is a regular file holding exactly the
    `Content-Length` announced (anything else is read through the request's stream)."""
    body = environ.get("wsgi.input")
    length = environ.get("CONTENT_LENGTH", "")
    if body is None or not length.isdigit():
        return None
    try:
        fd = body.fileno()
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        body.flush()  # nothing buffered in Python that the kernel does not have
        start = body.tell()
        size = os.fstat(fd).st_size - start
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return None
    return Spooled(fd, start, size) if size == int(length) else None


def _write_all(fd: int, data: bytes | memoryview, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view, position = view[written:], position + written


_copy_file_range = getattr(os, "copy_file_range", None)  # Linux


def _copy(source: int, start: int, target: int, position: int, size: int) -> None:
    """`size` bytes from `start` of `source` to `position` of `target`: inside the kernel
    where it can (same filesystem), else through one reused buffer."""
    done = 0
    try:
        while done < size and _copy_file_range is not None:
            copied = _copy_file_range(source, target, size - done, start + done, position + done)
            if copied == 0:
                break
            done += copied
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            raise
    buffer = bytearray(min(Piece.READ_SIZE, max(size - done, 1)))
    while done < size:
        read = os.preadv(source, [buffer], start + done)
        if read == 0:
            break
        _write_all(fd=target, data=memoryview(buffer)[:read], position=position + done)
        done += read
    if done != size:
        raise StorageError(f"the request body ended after {done} of {size} bytes")


def _hash_file(hashes: list[Any], fd: int, start: int, size: int) -> None:
    try:
        buffer = bytearray(min(Piece.READ_SIZE, max(size, 1)))
        view, done = memoryview(buffer), 0
        while done < size:
            read = os.preadv(fd, [view[: min(len(buffer), size - done)]], start + done)
            if read == 0:
                raise StorageError(f"the request body ended after {done} of {size} bytes")
            _update(hashes, view[:read])
            done += read
    finally:
        os.close(fd)


def _update(hashes: list[Any], chunk: bytes | memoryview) -> None:
    for h in hashes:
        h.update(chunk)


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _hash_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(8, thread_name_prefix="tus-hash")
        return _pool


@dataclass
class Appended:
    upload: ResumableUpload
    record: FileRecord | None


def append_piece(
    user: Caller, upload_id: uuid.UUID, offset: int, piece: Piece, storage: Storage, config: Any
) -> Appended:
    """Store the piece at `offset` and commit the new offset; the last piece completes the
    upload into a record. Requests for one upload are serialised by the row lock (PostgreSQL)
    and by the backend (the local append file's lock)."""
    upload = find_upload(user, upload_id, lock=True)
    if upload.completed_at is not None or offset != upload.offset:
        raise OffsetMismatch(f"Upload-Offset is {upload.offset}, not {offset}.")
    piece.start(upload)
    try:
        state = resumable_store(storage).append(
            str(upload.id),
            upload.stored_path,
            json.loads(upload.storage_state),
            offset,
            piece,
            upload.length,
        )
        if piece.size:
            upload.storage_state = json.dumps(state)
            upload.offset = offset + piece.size
            upload.expires_at = utcnow() + timedelta(hours=config["UPLOAD_EXPIRY_HOURS"])
            db.session.commit()
    finally:
        # The running SHA-256 may still be hashing beside the fsync and the commit.
        digest = piece.finish()
    if piece.size:
        digests.keep(upload.id, upload.offset, digest)
    record = None
    if upload.offset == upload.length and upload.completed_at is None:
        record = complete(upload, storage, config)
    return Appended(upload, record)


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


def complete(upload: ResumableUpload, storage: Storage, config: Any) -> FileRecord:
    """Hand the finished object to the record pipeline of `POST /api/files`. Whatever fails
    from here on (a refused type or metadata, storage or database gone) leaves nothing
    behind: no object, no upload; the client starts again."""
    upload_id = upload.id
    store = resumable_store(storage)
    store.complete(str(upload_id), upload.stored_path, json.loads(upload.storage_state))
    digest = digests.at(upload_id, upload.length)
    digests.keep(upload_id, 0, None)
    fields, field_errors = parse_metadata(upload.upload_metadata)
    staged = StagedFile(0, FILE_FIELD, file_name(fields), size=upload.length)
    staged.key = upload.stored_path
    try:
        check_file(
            staged,
            lambda: _sample(storage, upload.stored_path, upload.length),
            config["MAX_FILE_SIZE"],
        )
        if staged.error is None:
            staged.sha256 = (
                digest.hexdigest() if digest is not None else _sha256(storage, upload.stored_path)
            )
        metadata = validated(
            create_schema, fields, unreadable=field_errors, files=[staged], file_field=FILE_FIELD
        )
        # The upload is marked complete in the same commit that inserts the record.
        upload.completed_at = utcnow()
        [record] = writes.create_records(
            upload.user_id, [(upload.record_id, staged)], metadata, storage
        )
    except BaseException:
        db.session.rollback()
        discard([staged], storage)
        _forget(upload_id)
        raise
    return record


def _forget(upload_id: uuid.UUID) -> None:
    """Remove the row of an upload whose object is gone; if that fails too, reconciliation
    removes it once it expires."""
    try:
        db.session.execute(sa_delete(ResumableUpload).where(ResumableUpload.id == upload_id))
        db.session.commit()
    except SQLAlchemyError:
        db.session.rollback()
        log.warning("could not remove the row of failed upload %s", upload_id)


def terminate(user: Caller, upload_id: uuid.UUID, storage: Storage) -> None:
    """Remove the upload and its pieces; a finished upload's record stays."""
    upload = find_upload(user, upload_id, lock=True)
    if upload.completed_at is None:
        resumable_store(storage).abort(
            str(upload.id), upload.stored_path, json.loads(upload.storage_state)
        )
    db.session.delete(upload)
    db.session.commit()
    digests.keep(upload_id, 0, None)


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
