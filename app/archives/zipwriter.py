"""A streaming ZIP writer whose memory does not grow with the names of what it packs.

Why our own writer rather than zipstream-ng, the library of the field: zipstream-ng keeps, for
every member until the archive ends, a `ZipInfo` with the member's name (and its queue keeps
the name and the data source from `add` until the member is sent), because the central
directory at the end repeats every name. With names of up to 510 characters that is about
1 KiB per member, held for as long as the slowest reader takes, which put 100 slow readers of
a 1,000-file folder at 1.7 MiB each (issue 21). The names of a folder archive are a pure
function of the records picked, so they need not be kept: this writer records, per member,
only the numbers the central directory needs (offset, CRC-32, size) in compact arrays, and
takes the names again, in the same order, when it writes the central directory (the caller
reads them from the database a second time). Everything else is what zipstream-ng writes
(compared with its `ng.py`, 1.9): stored entries; the CRC-32 in a data descriptor after the
data (sizes are known before, the CRC only after reading); ZIP64 extra fields when a size or an
offset passes `ZIP64_LIMIT` (zipfile's: 2 GiB - 1, since some readers take the fields as
signed) and a ZIP64 end record when the count, the directory's offset or its size need it;
names in ASCII, or UTF-8 with the language-encoding flag (bit 11); one modification time for
the whole archive. `length` computes the exact size from the names' encoded lengths and the
sizes before the first byte, through the same helpers that write the headers.

The cost per member while an archive streams is 12 bytes here (offset 8, CRC 4), against the
~1 KiB of a zipstream-ng `ZipStreamInfo` with a long name.
"""

from __future__ import annotations

import struct
import time
import zipfile
import zlib
from array import array
from collections.abc import Iterable, Iterator

#: Sizes and offsets above this go into ZIP64 extra fields (a module attribute, so that tests
#: can take the ZIP64 paths with small archives).
ZIP64_LIMIT = zipfile.ZIP64_LIMIT
#: Members from this count on need a ZIP64 end record.
ZIP_FILECOUNT_LIMIT = zipfile.ZIP_FILECOUNT_LIMIT

_LOCAL = struct.Struct(zipfile.structFileHeader)
_CENTRAL = struct.Struct(zipfile.structCentralDir)
_END = struct.Struct(zipfile.structEndArchive)
_END64 = struct.Struct(zipfile.structEndArchive64)
_END64_LOCATOR = struct.Struct(zipfile.structEndArchive64Locator)
_DESCRIPTOR = struct.Struct("<4sLLL")
_DESCRIPTOR64 = struct.Struct("<4sLQQ")
_LOCAL_EXTRA64 = struct.Struct("<HHQQ")

_FLAG_DATA_DESCRIPTOR = 1 << 3
_FLAG_UTF8 = 1 << 11
_VERSION = 20  # stored entries with a data descriptor
_VERSION64 = 45  # ZIP64 extensions
_UNIX = 3  # made on Unix: the external attributes are a mode
_MODE = 0o100600 << 16  # a regular file, rw-------


def encode(name: str) -> tuple[bytes, int]:
    """The name's bytes and flag: ASCII as it is, anything else UTF-8 with bit 11."""
    try:
        return name.encode("ascii"), 0
    except UnicodeEncodeError:
        return name.encode("utf-8"), _FLAG_UTF8


def encoded_length(name: str) -> int:
    return len(encode(name)[0])


def _local_size(name_length: int, size: int) -> int:
    """Local header, data and data descriptor of one member."""
    if size > ZIP64_LIMIT:
        return _LOCAL.size + name_length + _LOCAL_EXTRA64.size + size + _DESCRIPTOR64.size
    return _LOCAL.size + name_length + size + _DESCRIPTOR.size


def _central_extra(size: int, offset: int) -> list[int]:
    extra = [size, size] if size > ZIP64_LIMIT else []
    if offset > ZIP64_LIMIT:
        extra.append(offset)
    return extra


def _central_size(name_length: int, size: int, offset: int) -> int:
    extra = _central_extra(size, offset)
    return _CENTRAL.size + name_length + (4 + 8 * len(extra) if extra else 0)


def _needs_end64(count: int, directory_offset: int, directory_size: int) -> bool:
    return (
        count >= ZIP_FILECOUNT_LIMIT
        or directory_offset > ZIP64_LIMIT
        or directory_size > ZIP64_LIMIT
    )


def length(members: Iterable[tuple[int, int]]) -> int:
    """The archive's exact size, from each member's (encoded name length, size) in order."""
    offset = directory = count = 0
    for name_length, size in members:
        directory += _central_size(name_length, size, offset)
        offset += _local_size(name_length, size)
        count += 1
    end = _END.size
    if _needs_end64(count, offset, directory):
        end += _END64.size + _END64_LOCATOR.size
    return offset + directory + end


def _dos_time(moment: time.struct_time) -> tuple[int, int]:
    year = min(max(moment.tm_year, 1980), 2107)
    date = (year - 1980) << 9 | moment.tm_mon << 5 | moment.tm_mday
    clock = moment.tm_hour << 11 | moment.tm_min << 5 | moment.tm_sec // 2
    return date, clock


class SizeMismatch(RuntimeError):
    """A member gave other than the announced number of bytes: the archive, whose length
    was promised, is cut short."""


class ZipWriter:
    """Writes members one after the other (`member`), then the central directory from the
    names given again in the same order (`finish`). Keeps per member its offset and CRC-32;
    the sizes it was given it takes again with the names."""

    def __init__(self, moment: time.struct_time | None = None) -> None:
        self._date, self._time = _dos_time(moment or time.localtime())
        self._offsets = array("Q")
        self._crcs = array("L")
        self._position = 0

    @property
    def position(self) -> int:
        """Bytes written so far."""
        return self._position

    def member(self, name: str, size: int, chunks: Iterable[bytes]) -> Iterator[bytes]:
        """Local header, the `size` bytes of `chunks` as they come, data descriptor."""
        raw, flags = encode(name)
        zip64 = size > ZIP64_LIMIT
        extra = _LOCAL_EXTRA64.pack(1, 16, 0, 0) if zip64 else b""
        header = _LOCAL.pack(
            zipfile.stringFileHeader,
            _VERSION64 if zip64 else _VERSION,
            0,
            flags | _FLAG_DATA_DESCRIPTOR,
            zipfile.ZIP_STORED,
            self._time,
            self._date,
            0,  # CRC-32 and sizes: in the data descriptor
            0xFFFFFFFF if zip64 else 0,
            0xFFFFFFFF if zip64 else 0,
            len(raw),
            len(extra),
        )
        self._offsets.append(self._position)
        self._position += len(header) + len(raw) + len(extra)
        yield header + raw + extra
        crc = sent = 0
        for chunk in chunks:
            sent += len(chunk)
            if sent > size:
                raise SizeMismatch(f"{name!r} is longer than {size} bytes")
            crc = zlib.crc32(chunk, crc)
            self._position += len(chunk)
            yield chunk
        if sent != size:
            raise SizeMismatch(f"{name!r} ended after {sent} of {size} bytes")
        self._crcs.append(crc)
        descriptor = (_DESCRIPTOR64 if zip64 else _DESCRIPTOR).pack(b"PK\x07\x08", crc, size, size)
        self._position += len(descriptor)
        yield descriptor

    def finish(self, members: Iterable[tuple[str, int]]) -> Iterator[bytes]:
        """The central directory from every member's (name, size), in the order they were
        written, and the end records."""
        start = self._position
        count = 0
        for (name, size), offset, crc in zip(members, self._offsets, self._crcs, strict=True):
            raw, flags = encode(name)
            extra = _central_extra(size, offset)
            packed = struct.pack(f"<HH{len(extra)}Q", 1, 8 * len(extra), *extra) if extra else b""
            version = _VERSION64 if extra else _VERSION
            entry = _CENTRAL.pack(
                zipfile.stringCentralDir,
                version,
                _UNIX,
                version,
                0,
                flags | _FLAG_DATA_DESCRIPTOR,
                zipfile.ZIP_STORED,
                self._time,
                self._date,
                crc,
                0xFFFFFFFF if size > ZIP64_LIMIT else size,
                0xFFFFFFFF if size > ZIP64_LIMIT else size,
                len(raw),
                len(packed),
                0,  # comment
                0,  # disk
                0,  # internal attributes
                _MODE,
                0xFFFFFFFF if offset > ZIP64_LIMIT else offset,
            )
            count += 1
            self._position += len(entry) + len(raw) + len(packed)
            yield entry + raw + packed
        directory_size = self._position - start
        end = b""
        if _needs_end64(count, start, directory_size):
            end = _END64.pack(
                zipfile.stringEndArchive64,
                44,  # size of the record after this field
                _VERSION64,
                _VERSION64,
                0,
                0,
                count,
                count,
                directory_size,
                start,
            ) + _END64_LOCATOR.pack(zipfile.stringEndArchive64Locator, 0, self._position, 1)
        end += _END.pack(
            zipfile.stringEndArchive,
            0,
            0,
            min(count, 0xFFFF),
            min(count, 0xFFFF),
            min(directory_size, 0xFFFFFFFF),
            min(start, 0xFFFFFFFF),
            0,  # comment
        )
        self._position += len(end)
        yield end


def coalesced(pieces: Iterable[bytes], chunk: int) -> Iterator[bytes]:
    """`pieces` in chunks of up to `chunk` bytes: small pieces (headers, small files, manifest
    records) joined, larger ones passed on as they are. When `pieces` fails, what came before
    is still sent, so that an archive cut short ends where its failure is. The pieces of a
    joined chunk are let go before it is handed on: a slow reader's archive, waiting at the
    `yield`, holds its chunk once, not twice."""
    held: list[bytes] = []
    size = 0
    try:
        for piece in pieces:
            if size + len(piece) > chunk and held:
                joined = b"".join(held)
                held, size = [], 0
                yield joined
            if len(piece) >= chunk:
                yield piece
                continue
            held.append(piece)
            size += len(piece)
    except Exception:
        if held:
            yield b"".join(held)
        raise
    if held:
        yield b"".join(held)
