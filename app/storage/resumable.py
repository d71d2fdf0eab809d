"""Objects that arrive in pieces over many requests (tus uploads), kept between requests in
the backend itself, so that an upload goes on after a restart and on any replica.

The caller (app/uploads) keeps the state these functions return in the database, next to the
offset it belongs to, and serialises the requests of one upload; a piece that was stored but
whose state was never committed is simply written again by the next request at that offset.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from .base import ObjectNotFound, Storage, StorageError, StorageUnavailable
from .local import LocalStorage, _fsync_dir
from .s3 import MIN_PART_SIZE, S3Storage, translate_error

#: Where the pieces of upload ``<id>`` wait: never under ``files/``, which holds only finished
#: objects, so reconciliation cannot mistake them for orphans.
PREFIX = "uploads"

State = dict[str, Any]


class Piece(Protocol):
    """The bytes of one request (app/tus/services.py), read once by the backend: through
    `chunks()`, or written by the piece itself at an offset of an open file (`write_to`)."""

    size: int

    def chunks(self) -> Iterator[bytes]: ...

    def write_to(self, fd: int, offset: int) -> None: ...

    def verify(self) -> None: ...


class ResumableStore(ABC):
    """How one backend keeps the pieces of an unfinished object."""

    @abstractmethod
    def begin(self, upload_id: str, key: str) -> State:
        """Prepare an empty upload that will become the object at ``key``."""

    @abstractmethod
    def append(
        self, upload_id: str, key: str, state: State, offset: int, piece: Piece, length: int
    ) -> State:
        """Add the piece's bytes at ``offset`` of an object of ``length`` bytes. Nothing is
        kept when reading or verifying the piece fails."""

    @abstractmethod
    def complete(self, upload_id: str, key: str, state: State) -> None:
        """Make everything appended visible as the object at ``key``."""

    @abstractmethod
    def abort(self, upload_id: str, key: str, state: State) -> None:
        """Remove every piece; a missing upload is not an error."""


class LocalResumable(ResumableStore):
    """One append file per upload, renamed into place when complete (no copy)."""

    def __init__(self, storage: LocalStorage) -> None:
        self.storage = storage

    def _path(self, upload_id: str) -> Path:
        return self.storage.path_for(f"{PREFIX}/{upload_id}/data")

    def begin(self, upload_id: str, key: str) -> State:
        path = self._path(upload_id)
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            path.touch(mode=0o600)
            # The new entries persist, so that the first piece's fsync has a file to keep.
            _fsync_dir(path.parent)
            _fsync_dir(path.parent.parent)
        except OSError as exc:
            raise StorageUnavailable(
                f"local storage could not start upload {upload_id}: {exc}"
            ) from exc
        return {}

    def append(
        self, upload_id: str, key: str, state: State, offset: int, piece: Piece, length: int
    ) -> State:
        """The piece goes straight into the append file (the kernel copies a spooled body),
        followed by one `fsync`: once this returns, the bytes survive a crash."""
        try:
            fd = os.open(self._path(upload_id), os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError as exc:
            raise ObjectNotFound(f"{PREFIX}/{upload_id}") from exc
        except OSError as exc:
            raise StorageUnavailable(
                f"local storage could not write upload {upload_id}: {exc}"
            ) from exc
        try:
            # One writer per upload at a time, even from two processes.
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_size < offset:
                raise StorageError(f"upload {upload_id} holds fewer than {offset} bytes")
            os.ftruncate(fd, offset)  # bytes of a request whose offset was never committed
            try:
                piece.write_to(fd, offset)
                os.fsync(fd)
                piece.verify()
            except BaseException:
                os.ftruncate(fd, offset)
                raise
        except OSError as exc:
            raise StorageUnavailable(
                f"local storage could not write upload {upload_id}: {exc}"
            ) from exc
        finally:
            os.close(fd)
        return state

    def complete(self, upload_id: str, key: str, state: State) -> None:
        source = self._path(upload_id)
        target = self.storage.path_for(key)
        try:
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.replace(source, target)
            _fsync_dir(target.parent)  # the record about to be created names this file
            with contextlib.suppress(OSError):
                source.parent.rmdir()
        except OSError as exc:
            raise StorageUnavailable(
                f"local storage could not store upload {upload_id}: {exc}"
            ) from exc

    def abort(self, upload_id: str, key: str, state: State) -> None:
        path = self._path(upload_id)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        with contextlib.suppress(OSError):
            path.parent.rmdir()


class S3Resumable(ResumableStore):
    """A multipart upload of the final key. S3 refuses parts under 5 MiB except the last, so a
    smaller piece waits as a temporary object (``uploads/<id>/tail``, under 5 MiB) until the
    next piece fills a part with it; on the way it is spooled on local disk, never in memory."""

    def __init__(self, storage: S3Storage) -> None:
        self.storage = storage
        self.client = storage.client
        self.bucket = storage.bucket

    def _tail_key(self, upload_id: str) -> str:
        return f"{PREFIX}/{upload_id}/tail"

    def _fail(self, exc: Exception, action: str, key: str) -> StorageError:
        return translate_error(exc, action, self.bucket, key)

    def begin(self, upload_id: str, key: str) -> State:
        try:
            response = self.client.create_multipart_upload(Bucket=self.bucket, Key=key)
        except (BotoCoreError, ClientError) as exc:
            raise self._fail(exc, "start of upload", key) from exc
        return {"upload_id": response["UploadId"], "parts": [], "tail": 0}

    def append(
        self, upload_id: str, key: str, state: State, offset: int, piece: Piece, length: int
    ) -> State:
        state = {**state, "parts": list(state["parts"])}
        tail_key = self._tail_key(upload_id)
        with tempfile.TemporaryFile(prefix="tus-part-") as spool:
            if state["tail"]:
                with self.storage.open(tail_key) as reader:
                    for chunk in reader:
                        spool.write(chunk)
            for chunk in piece.chunks():
                spool.write(chunk)
            piece.verify()
            if not piece.size:
                return state
            final = offset + piece.size == length
            size = spool.tell()
            spool.seek(0)
            try:
                if size >= MIN_PART_SIZE or final:
                    number = len(state["parts"]) + 1
                    response = self.client.upload_part(
                        Bucket=self.bucket,
                        Key=key,
                        UploadId=state["upload_id"],
                        PartNumber=number,
                        Body=spool,
                        ContentLength=size,
                    )
                    state["parts"].append({"PartNumber": number, "ETag": response["ETag"]})
                    state["tail"] = 0
                else:
                    self.client.put_object(
                        Bucket=self.bucket, Key=tail_key, Body=spool, ContentLength=size
                    )
                    state["tail"] = size
            except (BotoCoreError, ClientError) as exc:
                raise self._fail(exc, "upload of", key) from exc
        return state

    def complete(self, upload_id: str, key: str, state: State) -> None:
        try:
            self.client.complete_multipart_upload(
                Bucket=self.bucket,
                Key=key,
                UploadId=state["upload_id"],
                MultipartUpload={"Parts": state["parts"]},
            )
        except (BotoCoreError, ClientError) as exc:
            raise self._fail(exc, "upload of", key) from exc
        self.storage.delete(self._tail_key(upload_id))

    def abort(self, upload_id: str, key: str, state: State) -> None:
        if state.get("upload_id"):
            try:
                self.client.abort_multipart_upload(
                    Bucket=self.bucket, Key=key, UploadId=state["upload_id"]
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "NoSuchUpload":
                    raise self._fail(exc, "abort of upload", key) from exc
            except BotoCoreError as exc:
                raise self._fail(exc, "abort of upload", key) from exc
        self.storage.delete(self._tail_key(upload_id))


def resumable_store(storage: Storage) -> ResumableStore:
    if isinstance(storage, S3Storage):
        return S3Resumable(storage)
    if isinstance(storage, LocalStorage):
        return LocalResumable(storage)
    raise TypeError(f"{type(storage).__name__} cannot keep resumable uploads")
