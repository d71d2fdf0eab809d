"""Moving a request body between file descriptors with as little Python in the way as the
kernel allows: the body waitress spooled, copied by `copy_file_range` and hashed by offset."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from typing import Any

from app.storage import StorageError
from app.tus import hashing

READ_SIZE = 1024 * 1024


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
    if body is None or not (length.isascii() and length.isdigit()):
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


def write_all(fd: int, data: bytes | memoryview, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view, position = view[written:], position + written


_copy_file_range = getattr(os, "copy_file_range", None)  # Linux


def copy(source: int, start: int, target: int, position: int, size: int) -> None:
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
    buffer = bytearray(min(READ_SIZE, max(size - done, 1)))
    while done < size:
        read = os.preadv(source, [buffer], start + done)
        if read == 0:
            break
        write_all(fd=target, data=memoryview(buffer)[:read], position=position + done)
        done += read
    if done != size:
        raise StorageError(f"the request body ended after {done} of {size} bytes")


def hash_file(hashes: list[Any], fd: int, start: int, size: int) -> None:
    """Feed `size` bytes from `start` of `fd` to `hashes`; closes `fd` (a duplicate)."""
    try:
        buffer = bytearray(min(READ_SIZE, max(size, 1)))
        view, done = memoryview(buffer), 0
        while done < size:
            read = os.preadv(fd, [view[: min(len(buffer), size - done)]], start + done)
            if read == 0:
                raise StorageError(f"the request body ended after {done} of {size} bytes")
            hashing.update(hashes, view[:read])
            done += read
    finally:
        os.close(fd)
