"""Objects that arrive in pieces over many requests (tus uploads), kept between requests in
the backend itself, so that an upload goes on after a restart and on any replica.

The caller (app/tus/services.py) keeps the state these functions return in the database, next
to the offset it belongs to, and lets one request at a time write an upload; a piece that was
stored but whose state was never committed is simply written again by the next request at
that offset, and `settle` removes what a committed state no longer names.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from .base import ObjectNotFound, Storage, StorageError, StorageUnavailable
from .local import LocalStorage, fsync_dir
from .s3 import MIN_PART_SIZE, S3Storage, translate_error

#: Where the pieces of upload ``<id>`` wait: never under ``files/``, which holds only finished
#: objects, so reconciliation cannot mistake them for orphans.
PREFIX = "uploads"

State = dict[str, Any]


class Piece(Protocol):
    """The bytes of one request (app/tus/pieces.py), read once by the backend: through
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

    def settle(self, upload_id: str, old: State, new: State) -> None:
        """Remove what `old` named and `new` no longer does, once `new` is committed."""
        return None  # one append file holds everything: nothing to remove

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
            fsync_dir(path.parent)
            fsync_dir(path.parent.parent)
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
        if not source.exists() and target.exists():
            return  # moved by an earlier completion that failed later; the retry goes on
        try:
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.replace(source, target)
            fsync_dir(target.parent)  # the record about to be created names this file
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
    """A multipart upload of the final key. S3 refuses parts under 5 MiB except the last, so
    smaller pieces wait as temporary objects (``uploads/<id>/tail-<end offset>``, under 5 MiB
    together) until a piece fills a part with them.

    Each piece is stored once as it comes; a new one is merged with the waiting objects no
    larger than itself (as a binary counter carries), so a run of tiny pieces leaves a few
    objects and moves each byte a few times, instead of the whole tail being read and
    rewritten for every piece. An empty piece reads and writes nothing. On the way a piece is
    spooled on local disk, never in memory."""

    def __init__(self, storage: S3Storage) -> None:
        self.storage = storage
        self.client = storage.client
        self.bucket = storage.bucket

    def _prefix(self, upload_id: str) -> str:
        return f"{PREFIX}/{upload_id}/"

    @staticmethod
    def _tails(upload_id: str, state: State) -> list[dict[str, Any]]:
        if "tails" in state:
            return list(state["tails"])
        # The single tail object of states written before the pieces were kept apart.
        tail = state.get("tail", 0)
        return [{"key": f"{PREFIX}/{upload_id}/tail", "size": tail}] if tail else []

    def _fail(self, exc: Exception, action: str, key: str) -> StorageError:
        return translate_error(exc, action, self.bucket, key)

    def begin(self, upload_id: str, key: str) -> State:
        try:
            response = self.client.create_multipart_upload(Bucket=self.bucket, Key=key)
        except (BotoCoreError, ClientError) as exc:
            raise self._fail(exc, "start of upload", key) from exc
        return {"upload_id": response["UploadId"], "parts": [], "tails": []}

    def _copy_into(self, spool: BinaryIO, key: str) -> None:
        with self.storage.open(key) as reader:
            for chunk in reader:
                spool.write(chunk)

    def append(
        self, upload_id: str, key: str, state: State, offset: int, piece: Piece, length: int
    ) -> State:
        parts, tails = list(state["parts"]), self._tails(upload_id, state)
        with tempfile.TemporaryFile(prefix="tus-piece-") as body:
            for chunk in piece.chunks():
                body.write(chunk)
            piece.verify()
            if not piece.size:
                return state
            end = offset + piece.size
            waiting = sum(tail["size"] for tail in tails)
            if waiting + piece.size >= MIN_PART_SIZE or end == length:
                merged, kept = tails, []
            else:
                first, size = len(tails), piece.size
                while first and tails[first - 1]["size"] <= size:
                    first -= 1
                    size += tails[first]["size"]
                merged, kept = tails[first:], tails[:first]
            with tempfile.TemporaryFile(prefix="tus-part-") as spool:
                for tail in merged:
                    self._copy_into(spool, tail["key"])
                body.seek(0)
                shutil.copyfileobj(body, spool, 1024 * 1024)
                size = spool.tell()
                spool.seek(0)
                try:
                    if not kept and (size >= MIN_PART_SIZE or end == length):
                        number = len(parts) + 1
                        response = self.client.upload_part(
                            Bucket=self.bucket,
                            Key=key,
                            UploadId=state["upload_id"],
                            PartNumber=number,
                            Body=spool,
                            ContentLength=size,
                        )
                        parts.append({"PartNumber": number, "ETag": response["ETag"]})
                    else:
                        tail_key = f"{self._prefix(upload_id)}tail-{end}"
                        self.client.put_object(
                            Bucket=self.bucket, Key=tail_key, Body=spool, ContentLength=size
                        )
                        kept.append({"key": tail_key, "size": size})
                except (BotoCoreError, ClientError) as exc:
                    raise self._fail(exc, "upload of", key) from exc
        return {"upload_id": state["upload_id"], "parts": parts, "tails": kept}

    def settle(self, upload_id: str, old: State, new: State) -> None:
        named = {tail["key"] for tail in self._tails(upload_id, new)}
        for tail in self._tails(upload_id, old):
            if tail["key"] not in named:
                self.storage.delete(tail["key"])

    def _remove_pieces(self, upload_id: str) -> None:
        for obj in list(self.storage.iter_objects(self._prefix(upload_id))):
            self.storage.delete(obj.key)

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
        self._remove_pieces(upload_id)

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
        self._remove_pieces(upload_id)


def resumable_store(storage: Storage) -> ResumableStore:
    if isinstance(storage, S3Storage):
        return S3Resumable(storage)
    if isinstance(storage, LocalStorage):
        return LocalResumable(storage)
    raise TypeError(f"{type(storage).__name__} cannot keep resumable uploads")
