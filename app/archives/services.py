"""Which records a folder archive holds, under which entry names, and the archive itself.

Who may see and download a record is decided by the rules of app/files/access.py (through
`Listing` and `access.downloadable`); this module only picks, names and packs. The archive is a
ZIP of stored (uncompressed) entries (app/archives/zipwriter.py), so its length is known
before the first byte and every entry streams from storage as it is read.

What an archive holds while it streams does not grow with its records' metadata or names:
per file a few fixed-size numbers in arrays (`Members`: id, size, the number that makes its
name unique, the length of that name, a fingerprint of name, key and size; the manifest's
digest; the writer's offset and CRC-32), about 70 bytes. Everything else is read again from
the database, a few records at a time, each batch in an app context of its own so that no
database connection is held while the client reads: the manifest's records as it streams,
the members' names and keys as they are packed, the names once more for the central
directory. An entry name is a pure function of its record's path and original name and of
its number, so reading the record again gives the same name; a record that reads otherwise
(changed, deleted, no longer downloadable) ends the stream early (`ArchiveChanged`), the only
honest signal left after the headers.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import unicodedata
import uuid
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date
from itertools import chain
from typing import Any

from flask import Flask
from sqlalchemy import Row, Select

from app import streaming
from app.archives import zipwriter
from app.auth.services import Caller
from app.exceptions import ValidationFailed
from app.extensions import db
from app.files import access
from app.files.listing import Listing
from app.files.relations import SeenLinks
from app.models import FileRecord
from app.schemas.fast_dump import FastDump
from app.storage import Storage

MANIFEST_NAME = "manifest.json"
#: Rows read from the database per round trip while picking the records of an archive.
BATCH = 500
#: Full records read per round trip for the manifest: at most metadata length, a batch is
#: about 60 KiB, which is what one archive holds in memory while its manifest streams.
MANIFEST_BATCH = 4
#: Records read again per round trip for the members' names and keys while the archive
#: streams (a few KiB of names each).
MEMBER_BATCH = 32
#: Bytes of the archive's chunks: the small pieces (headers, small files, manifest records)
#: are joined up to it, and the server reads ahead of a slow reader only while it holds less.
CHUNK_BYTES = 64 * 1024
#: Bytes of each storage read of a member, as downloads read (smaller reads halve the speed
#: of an archive of large files: more handovers between the pump and the event loop).
READ_BYTES = streaming.READ_BYTES

_PICKED_COLUMNS = (FileRecord.id, FileRecord.path, FileRecord.original_name, FileRecord.size)
_MEMBER_COLUMNS = (*_PICKED_COLUMNS, FileRecord.stored_path)


class ArchiveChanged(RuntimeError):
    """A record of a streaming archive changed or became unavailable after the archive's
    length was promised: the archive is cut short, the only honest signal left after the
    headers."""


class ManifestChanged(ArchiveChanged):
    """A record of a streaming manifest reads differently than when its length was measured."""


@dataclass(frozen=True)
class ArchiveLimits:
    max_files: int
    max_bytes: int


def _too_big(message: str) -> ValidationFailed:
    return ValidationFailed({"path": [message]})


def scope(user: Caller | None, path: str, today: date) -> Select[Any]:
    """The records under `path` that `user` (None: the public) may download on `today`."""
    # An empty path means every folder, records without a path included (as in the lists).
    listing = Listing.of(user, {"path": path} if path else {})
    return listing.query().where(access.downloadable(user, today))


def _safe_segment(segment: str) -> str:
    """A path segment no unpacker can turn into a way out of the target folder."""
    text = "".join(
        "_" if ch in '/\\:*?"<>|' or not ch.isprintable() else ch
        for ch in unicodedata.normalize("NFC", segment)
    ).strip()
    if text in ("", ".", ".."):
        return "_"
    return text


def _numbered(name: str, n: int) -> str:
    """`name (n).ext`, as browsers and desktop file managers number a repeated name."""
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        return f"{name} ({n})"
    return f"{stem} ({n}).{ext}"


def _folder(path: str | None) -> str:
    """The entry folder of a record path: safe segments, each followed by `/`."""
    folders = [_safe_segment(s) for s in (path or "").split("/") if s]
    if folders and folders[0].casefold() == MANIFEST_NAME.casefold():
        # A top folder of the manifest's name would make it a file and a folder at once.
        folders[0] = _numbered(folders[0], 2)
    return "".join(f"{s}/" for s in folders)


def entry_name(path: str | None, original_name: str, number: int) -> str:
    """A record's entry name: `<its path>/<original name>`, relative, without `..`; with a
    `number` above 1, `name (number).ext`."""
    name = _safe_segment(original_name)
    return _folder(path) + (name if number == 1 else _numbered(name, number))


class _Folders:
    """The folders of an archive (case-insensitively): a file may not take a folder's name,
    or unzip, 7z and Python's zipfile cannot unpack the archive."""

    def __init__(self, folders: Iterable[str]) -> None:
        self._sorted = sorted({f.casefold() for f in folders if f})

    def __contains__(self, name: str) -> bool:
        prefix = name.casefold() + "/"
        i = bisect.bisect_left(self._sorted, prefix)
        return i < len(self._sorted) and self._sorted[i].startswith(prefix)


def _key(name: str) -> int:
    """A name, case-insensitively, as 8 bytes: what picking keeps of each name it gave. Two
    names share a key with a chance of about 1 in 2**64 per pair; such a name is numbered
    like a repeated one, which keeps every name unique."""
    digest = hashlib.blake2b(name.casefold().encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _fingerprint(name: str, stored_path: str, size: int) -> int:
    """What packing a member needs of its record, as 8 bytes: read again, it must match."""
    text = f"{name}\0{stored_path}\0{size}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


@dataclass(eq=False)
class Members:
    """The files of an archive, in folder and upload order, as fixed-size numbers: the
    record's id, its size and the number that makes its entry name unique (1: none); once
    `Manifest.measure` read the records, also each entry name's encoded length and the
    fingerprint of name, key and size."""

    ids: bytearray = field(default_factory=bytearray)
    sizes: array = field(default_factory=lambda: array("Q"))
    numbers: array = field(default_factory=lambda: array("L"))
    name_lengths: array = field(default_factory=lambda: array("L"))
    fingerprints: array = field(default_factory=lambda: array("Q"))

    def __len__(self) -> int:
        return len(self.sizes)

    def add(self, record_id: uuid.UUID, size: int, number: int) -> None:
        self.ids += record_id.bytes
        self.sizes.append(size)
        self.numbers.append(number)

    def id(self, index: int) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self.ids[16 * index : 16 * index + 16]))

    def record_ids(self) -> Iterator[uuid.UUID]:
        return (self.id(i) for i in range(len(self)))

    def read(
        self, select: Select[Any], start: int, stop: int, columns: Iterable[Any]
    ) -> list[Row[Any] | None]:
        """Members `start`..`stop` read again within `select` (None: gone or hidden since)."""
        wanted = [self.id(i) for i in range(start, stop)]
        rows = db.session.execute(
            select.with_only_columns(*columns).where(FileRecord.id.in_(wanted))
        ).all()
        by_id = {row.id: row for row in rows}
        return [by_id.get(record_id) for record_id in wanted]


def pick(user: Caller | None, path: str, today: date, limits: ArchiveLimits) -> Members:
    """The records under `path` that `user` (None: the public) may download today, in folder
    and upload order, each numbered so that its entry name is unique (a name repeated within
    a folder, or one that is also a folder there, compared case-insensitively, becomes
    `name (2).ext`); more than the limits allow is a validation error on `path`.

    Two readings: the folders first (a file may not take a folder's name), then the names;
    neither keeps a name beyond the request. A record that appears between the two (a folder
    not seen the first time) is left out, as if it had come after the request."""
    query = scope(user, path, today).order_by(FileRecord.path, FileRecord.created_at, FileRecord.id)

    def rows(*columns: Any) -> Iterator[Row[Any]]:
        result = db.session.execute(
            query.with_only_columns(*columns).execution_options(yield_per=BATCH)
        )
        try:
            count = total = 0
            for row in result:
                count += 1
                total += row.size
                if count > limits.max_files:
                    raise _too_big(
                        f"The folder holds more than {limits.max_files} downloadable files; "
                        "choose a narrower path."
                    )
                if total > limits.max_bytes:
                    raise _too_big(
                        f"The folder's files add up to more than {limits.max_bytes} bytes; "
                        "choose a narrower path."
                    )
                yield row
        finally:
            result.close()

    paths: dict[str | None, str] = {}
    for row in rows(FileRecord.path, FileRecord.size):
        if row.path not in paths:
            paths[row.path] = _folder(row.path)
    folders = _Folders(paths.values())
    taken = {_key(MANIFEST_NAME)}
    members = Members()
    for row in rows(*_PICKED_COLUMNS):
        folder = paths.get(row.path)
        if folder is None:
            continue
        name = _safe_segment(row.original_name)
        candidate, n = folder + name, 1
        while _key(candidate) in taken or candidate in folders:
            n += 1
            candidate = folder + _numbered(name, n)
        taken.add(_key(candidate))
        members.add(row.id, row.size, n)
    return members


def _item(name: str, row: dict[str, Any], sha256: str) -> bytes:
    """One record of the manifest, laid out as `json.dumps(..., indent=2)` lays out the
    whole manifest."""
    text = json.dumps({"entry": name, "sha256": sha256, **row}, ensure_ascii=False, indent=2)
    return ("    " + text.replace("\n", "\n    ")).encode("utf-8")


def _digest(item: bytes) -> bytes:
    return hashlib.blake2b(item, digest_size=16).digest()


_OPEN = b'{\n  "files": ['
_SEPARATOR = b",\n"


def _close(empty: bool) -> bytes:
    return b"]\n}\n" if empty else b"\n  ]\n}\n"


class Manifest:
    """`manifest.json`: the records' metadata as the API shows them, with each entry's name
    and SHA-256, read twice from the database in small batches: `measure` (in the request)
    keeps each record's length and digest and drops the members gone meanwhile; the bytes
    are read again as the archive streams, each batch in an app context of its own so that
    no database connection is held while the client reads. A record that reads differently
    the second time ends the stream with `ManifestChanged`."""

    def __init__(
        self,
        app: Flask,
        members: Members,
        scope: Callable[[], Select[Any]],
        dump: FastDump | SeenLinks,
    ) -> None:
        self.app = app
        self.members = members
        self._scope = scope
        self._dump = dump
        self._digests = bytearray()
        self.size = 0

    def _read(self, members: Members, start: int, stop: int) -> deque[tuple[Any, Any]]:
        """(row, its dump) of members `start`..`stop`; (None, None) for one gone meanwhile."""
        rows = members.read(self._scope(), start, stop, FileRecord.__table__.columns)
        found = [row for row in rows if row is not None]
        dumped = iter(self._dump.dump(found, many=True) if found else [])
        return deque((None, None) if row is None else (row, next(dumped)) for row in rows)

    def _items(
        self, members: Members, start: int, read: deque[tuple[Any, Any]]
    ) -> Iterator[tuple[Row | None, bytes]]:
        """Each record's bytes, made as they are asked for; a record read is let go once its
        bytes are made, so that an archive waiting for a slow reader holds one record, not
        its batch."""
        for index in range(start, start + len(read)):
            row, dumped = read.popleft()
            if row is None:
                yield None, b""
                continue
            name = entry_name(row.path, row.original_name, members.numbers[index])
            yield row, _item(name, dumped, row.checksum_sha256)

    def measure(self) -> Members:
        """Read the records once (in the request's app context): the manifest's exact size,
        and what the members need. Returns the members still there."""
        members, kept = self.members, Members()
        size = len(_OPEN)
        for start in range(0, len(members), MANIFEST_BATCH):
            stop = min(start + MANIFEST_BATCH, len(members))
            read = self._read(members, start, stop)
            for index, (row, item) in enumerate(self._items(members, start, read), start):
                if row is None:
                    continue  # deleted or hidden since it was picked
                size += len(_SEPARATOR if len(kept) else b"\n") + len(item)
                kept.add(row.id, row.size, members.numbers[index])
                name = entry_name(row.path, row.original_name, members.numbers[index])
                kept.name_lengths.append(zipwriter.encoded_length(name))
                kept.fingerprints.append(_fingerprint(name, row.stored_path, row.size))
                self._digests += _digest(item)
        self.members = kept
        self.size = size + len(_close(not len(kept)))
        return kept

    def __iter__(self) -> Iterator[bytes]:
        yield _OPEN
        members = self.members
        for start in range(0, len(members), MANIFEST_BATCH):
            stop = min(start + MANIFEST_BATCH, len(members))
            with self.app.app_context():
                read = self._read(members, start, stop)
            for n, (row, item) in enumerate(self._items(members, start, read), start):
                if row is None or _digest(item) != self._digests[16 * n : 16 * n + 16]:
                    raise ManifestChanged(
                        f"record {members.id(n)} changed while its archive streamed"
                    )
                # Two pieces rather than a copy of the record with its separator.
                yield _SEPARATOR if n else b"\n"
                yield item
        yield _close(not len(members))


class FolderArchive:
    """The archive: the manifest first, then every member; `len()` is its exact size.

    The members' names and keys are read again `MEMBER_BATCH` at a time as they are packed,
    and their names once more for the central directory; a record that reads otherwise than
    when it was measured (`Members.fingerprints`) ends the stream with `ArchiveChanged`."""

    def __init__(
        self,
        app: Flask,
        manifest: Manifest,
        scope: Callable[[], Select[Any]],
        storage: Storage,
        on_member: Callable[[uuid.UUID], None] | None = None,
    ) -> None:
        self.app = app
        self.manifest = manifest
        self.members = manifest.members
        self._scope = scope
        self.storage = storage
        #: Called with a member's record id once the chunk holding its last byte was handed
        #: on (the statistics count it then: a reader gone before counts nothing of it).
        self.on_member = on_member
        #: (offset after the member, its index) of the members written but not yet handed on.
        self._ends: deque[tuple[int, int]] = deque()

    def __len__(self) -> int:
        members = self.members
        sizes = zip(members.name_lengths, members.sizes, strict=True)
        first = (zipwriter.encoded_length(MANIFEST_NAME), self.manifest.size)
        return zipwriter.length(chain([first], sizes))

    def _batches(self) -> Iterator[list[tuple[str, str, int]]]:
        """(name, key, size) of every member, a batch per database round trip."""
        members = self.members
        for start in range(0, len(members), MEMBER_BATCH):
            stop = min(start + MEMBER_BATCH, len(members))
            with self.app.app_context():
                rows = members.read(self._scope(), start, stop, _MEMBER_COLUMNS)
            batch = []
            for index, row in enumerate(rows, start):
                name = row and entry_name(row.path, row.original_name, members.numbers[index])
                if (
                    row is None
                    or _fingerprint(name, row.stored_path, row.size) != members.fingerprints[index]
                ):
                    raise ArchiveChanged(f"record {members.id(index)} changed while streamed")
                batch.append((name, row.stored_path, row.size))
            yield batch

    def _content(self, key: str) -> Iterator[bytes]:
        with self.storage.open(key, chunk_size=READ_BYTES) as reader:
            yield from reader

    def _members(self, writer: zipwriter.ZipWriter) -> Iterator[bytes]:
        index = 0
        for batch in self._batches():
            for name, key, size in batch:
                yield from writer.member(name, size, self._content(key))
                if self.on_member is not None:
                    self._ends.append((writer.position, index))
                index += 1

    def _pieces(self) -> Iterator[bytes]:
        writer = zipwriter.ZipWriter()
        yield from writer.member(MANIFEST_NAME, self.manifest.size, self.manifest)
        yield from self._members(writer)  # its last batch of names is gone when it ends
        names = chain(
            [(MANIFEST_NAME, self.manifest.size)],
            ((name, size) for batch in self._batches() for name, _, size in batch),
        )
        yield from writer.finish(names)

    def __iter__(self) -> Iterator[bytes]:
        chunks = zipwriter.coalesced(self._pieces(), CHUNK_BYTES)
        return chunks if self.on_member is None else self._handed_on(chunks)

    def _handed_on(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        """`chunks`, calling `on_member` for each member whose last byte is in the chunk being
        handed on. A member's end is noted when the pieces move past it, which `coalesced`
        makes them do before it hands on the chunk that holds it."""
        sent = 0
        ends = self._ends
        for chunk in chunks:
            sent += len(chunk)
            while ends and ends[0][0] <= sent:
                self.on_member(self.members.id(ends.popleft()[1]))  # type: ignore[misc]
            yield chunk


def archive_file_name(path: str) -> str:
    """The download's name: the last segment of the folder asked for."""
    last = [s for s in path.replace("\\", "/").split("/") if s.strip()]
    return f"{_safe_segment(last[-1]) if last else 'files'}.zip"
