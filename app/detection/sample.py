"""A bounded view of an upload: its first and last bytes and its size.

Uploads are streamed and may be hundreds of MiB, so detection never sees the whole content; every
rule works on this sample and treats bytes outside it as unknown.
"""

from __future__ import annotations

import io
from collections import deque
from dataclasses import dataclass
from typing import BinaryIO

HEAD_BYTES = 2 * 1024 * 1024
TAIL_BYTES = 1024 * 1024


class OutsideSample(Exception):
    """A read asked for bytes the sample does not hold; the caller must decide without them."""


@dataclass(frozen=True, slots=True)
class Sample:
    """The first ``len(head)`` and last ``len(tail)`` bytes of a content of ``size`` bytes."""

    head: bytes
    tail: bytes
    size: int

    def __post_init__(self) -> None:
        if self.size < 0 or len(self.head) > self.size or len(self.tail) > self.size:
            raise ValueError("head and tail cannot be longer than the content")

    @property
    def is_complete(self) -> bool:
        """True when head and tail together cover every byte of the content."""
        return len(self.head) + len(self.tail) >= self.size

    @property
    def tail_offset(self) -> int:
        """Offset in the content of the first byte of ``tail``."""
        return self.size - len(self.tail)

    def read_at(self, offset: int, length: int) -> bytes:
        """Return content bytes like ``seek(offset); read(length)`` on the full content would.

        Raises OutsideSample when any requested byte before the end of the content is not held.
        """
        if offset < 0 or length < 0:
            raise ValueError("offset and length must not be negative")
        end = min(offset + length, self.size)
        if offset >= end:
            return b""
        head_len = len(self.head)
        tail_offset = self.tail_offset
        if end <= head_len:
            return self.head[offset:end]
        if offset >= tail_offset:
            return self.tail[offset - tail_offset : end - tail_offset]
        if tail_offset <= head_len:
            return self.head[offset:tail_offset] + self.tail[: end - tail_offset]
        raise OutsideSample(f"bytes {offset}..{end} are not within the sample")

    @classmethod
    def from_bytes(cls, data: bytes) -> Sample:
        """Sample of an in-memory content, exactly as a streamed upload of it would give."""
        return cls(head=bytes(data[:HEAD_BYTES]), tail=bytes(data[-TAIL_BYTES:]), size=len(data))

    @classmethod
    def from_file(cls, fileobj: BinaryIO) -> Sample:
        """Sample a seekable binary file from its current position, reading at most HEAD+TAIL bytes.

        The file position is restored afterwards so the caller can still copy the file.
        """
        start = fileobj.tell()
        try:
            head = _read_exactly(fileobj, HEAD_BYTES)
            end = fileobj.seek(0, io.SEEK_END)
            size = end - start
            if size <= len(head):
                tail = head[-TAIL_BYTES:]
            else:
                tail_start = max(end - TAIL_BYTES, start + len(head))
                fileobj.seek(tail_start)
                tail = _read_exactly(fileobj, end - tail_start)
                if len(tail) < TAIL_BYTES:
                    tail = head[len(head) - (TAIL_BYTES - len(tail)) :] + tail
        finally:
            fileobj.seek(start)
        return cls(head=head, tail=tail, size=size)


def _read_exactly(fileobj: BinaryIO, count: int) -> bytes:
    """Read up to ``count`` bytes, looping because raw files may return short reads."""
    parts: list[bytes] = []
    remaining = count
    while remaining > 0:
        chunk = fileobj.read(remaining)
        if not chunk:
            break
        parts.append(chunk)
        remaining -= len(chunk)
    return b"".join(parts)


class SampleCollector:
    """Builds a Sample while an upload streams past, keeping only the head and a rolling tail.

    The tail is kept as the last chunks themselves, not copied into a buffer: shifting a 1 MiB
    buffer for every chunk cost as much as writing the upload to disk.
    """

    __slots__ = ("_head", "_head_size", "_tail", "_tail_size", "_size")

    def __init__(self) -> None:
        self._head: list[bytes] = []
        self._head_size = 0
        self._tail: deque[bytes] = deque()
        self._tail_size = 0
        self._size = 0

    @property
    def size(self) -> int:
        """Number of bytes fed so far."""
        return self._size

    def feed(self, chunk: bytes | bytearray | memoryview) -> None:
        """Account for the next chunk of the content; memory stays within the head, the tail
        and one chunk."""
        data = chunk if type(chunk) is bytes else bytes(chunk)  # never a buffer reused later
        count = len(data)
        if not count:
            return
        self._size += count
        missing = HEAD_BYTES - self._head_size
        if missing > 0:
            self._head.append(data if count <= missing else data[:missing])
            self._head_size += min(count, missing)
        self._tail.append(data)
        self._tail_size += count
        while self._tail_size - len(self._tail[0]) >= TAIL_BYTES:
            self._tail_size -= len(self._tail.popleft())

    def sample(self) -> Sample:
        """The sample of everything fed so far (each byte of it copied once, here)."""
        tail: list[bytes | memoryview] = list(self._tail)
        excess = self._tail_size - TAIL_BYTES
        if excess > 0:
            tail[0] = memoryview(tail[0])[excess:]
        return Sample(head=b"".join(self._head), tail=b"".join(tail), size=self._size)
