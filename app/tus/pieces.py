"""One PATCH body on its way into storage: read once, counted against the room left in the
upload, hashed for `Upload-Checksum` and for the file's SHA-256."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any, BinaryIO

from app.models import ResumableUpload
from app.tus import copying, hashing
from app.tus.copying import Spooled
from app.tus.protocol import CHECKSUMS, ChecksumMismatch, TooLarge

log = logging.getLogger(__name__)


class Piece:
    """A request body, read by the backend one of two ways, both calling `verify()` before
    the backend keeps anything, so a body that breaks a rule leaves the upload as it was:
    - `chunks()`: the body in chunks, hashed beside the backend's writes (S3, and bodies the
      server kept in memory);
    - `write_to(fd, offset)`: the local backend. A body the server spooled to a file (waitress
      does for every body over 512 KiB) is copied into the append file by the kernel, after
      its size was checked against the room left; it is then hashed from the spool in a
      thread while the backend `fsync`s and the caller commits the offset. `verify()` waits
      for that hash only when the body has an `Upload-Checksum`; the running SHA-256 is
      collected by `finish()` after the commit.
    """

    READ_SIZE = copying.READ_SIZE

    def __init__(
        self,
        stream: BinaryIO,
        upload_id: uuid.UUID,
        checksum: tuple[str, bytes] | None,
        spooled: Spooled | None = None,
        announced: int | None = None,
    ) -> None:
        self.stream = stream
        self.upload_id = upload_id
        self.checksum = checksum
        self.spooled = spooled
        #: The request's Content-Length, when it sent one: checked before a byte is read.
        self.announced = spooled.size if spooled is not None else announced
        self.size = 0
        self.room = 0
        self.digest: Any | None = None
        self._check: Any | None = None
        self._hashing: Future[None] | None = None

    def start(self, upload: ResumableUpload) -> None:
        self.room = upload.length - upload.offset
        self.digest = hashing.digests.at(upload.id, upload.offset)

    def _hashes(self) -> list[Any]:
        self._check = CHECKSUMS[self.checksum[0]]() if self.checksum else None
        return [h for h in (self.digest, self._check) if h is not None]

    def _too_large(self) -> TooLarge:
        return TooLarge(f"The upload has room for {self.room} more bytes.")

    def chunks(self) -> Iterator[bytes]:
        """The body in chunks; each is hashed in a thread of its own while the backend stores
        it, which `verify` waits for."""
        hashes = self._hashes()
        while chunk := self.stream.read(self.READ_SIZE):
            self.size += len(chunk)
            if self.size > self.room:
                self._settle()
                raise self._too_large()
            self._settle()
            if hashes:
                self._hashing = hashing.pool().submit(hashing.update, hashes, chunk)
            yield chunk
        self._settle()

    def write_to(self, fd: int, offset: int) -> None:
        """The whole body written at `offset` of the open file `fd` (not synced)."""
        spooled = self.spooled
        if spooled is None:
            for chunk in self.chunks():
                copying.write_all(fd, chunk, offset + self.size - len(chunk))
            return
        if spooled.size > self.room:
            raise self._too_large()
        copying.copy(spooled.fd, spooled.start, fd, offset, spooled.size)
        self.size = spooled.size
        hashes = self._hashes()
        if hashes:
            # A descriptor of its own: the server closes the spool when the request ends.
            source = os.dup(spooled.fd)
            self._hashing = hashing.pool().submit(
                copying.hash_file, hashes, source, spooled.start, spooled.size
            )

    def _settle(self) -> None:
        if self._hashing is not None:
            running, self._hashing = self._hashing, None
            running.result()

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
