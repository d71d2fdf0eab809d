"""Which records a folder archive holds, under which entry names, and the archive itself.

Who may see and download a record is decided by the rules of app/files/access.py (through
`Listing` and `access.downloadable`); this module only picks, names and packs. The archive is a
ZIP of stored (uncompressed) entries, so its length is known before the first byte and every
entry streams from storage as it is read. The manifest streams too: its length is measured in
a first reading of the records and its bytes come from a second one while the archive is sent,
so memory stays at a few small values per file, whatever the records' metadata hold.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import date
from typing import Any

from flask import Flask
from sqlalchemy import Row, Select
from zipstream import ZIP_STORED, ZipStream

from app import streaming
from app.auth.services import Caller
from app.exceptions import ValidationFailed
from app.extensions import db
from app.files import access
from app.files.listing import Listing
from app.models import FileRecord
from app.schemas.fast_dump import FastDump
from app.storage import Storage

MANIFEST_NAME = "manifest.json"
#: Rows read from the database per round trip while picking the records of an archive.
BATCH = 500
#: Full records read per round trip for the manifest: at most metadata length, a batch is a
#: few hundred KiB, which is what one archive holds in memory while its manifest streams.
MANIFEST_BATCH = 8
_PICKED_COLUMNS = (
    FileRecord.id,
    FileRecord.path,
    FileRecord.original_name,
    FileRecord.size,
    FileRecord.stored_path,
)


class ManifestChanged(RuntimeError):
    """A record of a streaming manifest changed or became unavailable after its length was
    measured: the archive is cut short, the only honest signal left after the headers."""


@dataclass(frozen=True)
class ArchiveLimits:
    max_files: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class Entry:
    """One file of an archive: its entry name and what packing it needs of its record."""

    name: str
    id: Any
    stored_path: str
    size: int


def _too_big(message: str) -> ValidationFailed:
    return ValidationFailed({"path": [message]})


def scope(user: Caller | None, path: str, today: date) -> Select[Any]:
    """The records under `path` that `user` (None: the public) may download on `today`."""
    # An empty path means every folder, records without a path included (as in the lists).
    listing = Listing.of(user, {"path": path} if path else {})
    return listing.query().where(access.downloadable(user, today))


def downloadable_records(
    user: Caller | None, path: str, today: date, limits: ArchiveLimits
) -> list[Row[Any]]:
    """The records under `path` that `user` (None: the public) may download today, in folder
    and upload order, with the columns naming and packing need; more than the limits allow
    is a validation error on `path`."""
    query = (
        scope(user, path, today)
        .with_only_columns(*_PICKED_COLUMNS)
        .order_by(FileRecord.path, FileRecord.created_at, FileRecord.id)
    )
    picked: list[Row[Any]] = []
    total = 0
    result = db.session.execute(query.execution_options(yield_per=BATCH))
    try:
        for row in result:
            picked.append(row)
            total += row.size
            if len(picked) > limits.max_files:
                raise _too_big(
                    f"The folder holds more than {limits.max_files} downloadable files; "
                    "choose a narrower path."
                )
            if total > limits.max_bytes:
                raise _too_big(
                    f"The folder's files add up to more than {limits.max_bytes} bytes; "
                    "choose a narrower path."
                )
    finally:
        result.close()
    return picked


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


class _Folders:
    """The folders of an archive (case-insensitively): a file may not take a folder's name,
    or unzip, 7z and Python's zipfile cannot unpack the archive."""

    def __init__(self, folders: Iterable[str]) -> None:
        self._sorted = sorted({f.casefold() for f in folders if f})

    def __contains__(self, name: str) -> bool:
        prefix = name.casefold() + "/"
        i = bisect.bisect_left(self._sorted, prefix)
        return i < len(self._sorted) and self._sorted[i].startswith(prefix)


def entry_names(records: list[Row[Any]]) -> list[Entry]:
    """Each record at `<its path>/<original name>`: relative, without `..`, unique (a name
    repeated within a folder, or one that is also a folder there, compared case-insensitively,
    becomes `name (2).ext`)."""
    folder_of = {record.path: _folder(record.path) for record in records}
    folders = _Folders(folder_of.values())
    taken = {MANIFEST_NAME.casefold()}
    entries = []
    for record in records:
        folder = folder_of[record.path]
        name = _safe_segment(record.original_name)
        candidate, n = folder + name, 1
        while candidate.casefold() in taken or candidate in folders:
            n += 1
            candidate = folder + _numbered(name, n)
        taken.add(candidate.casefold())
        entries.append(Entry(candidate, record.id, record.stored_path, record.size))
    return entries


def _item(entry: Entry, row: dict[str, Any], sha256: str) -> bytes:
    """One record of the manifest, laid out as `json.dumps(..., indent=2)` lays out the
    whole manifest."""
    text = json.dumps({"entry": entry.name, "sha256": sha256, **row}, ensure_ascii=False, indent=2)
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
    keeps each record's length and digest and drops the entries gone meanwhile; the bytes
    are read again as the archive streams, each batch in an app context of its own so that
    no database connection is held while the client reads. A record that reads differently
    the second time ends the stream with `ManifestChanged`."""

    def __init__(
        self,
        app: Flask,
        entries: list[Entry],
        scope: Callable[[], Select[Any]],
        dump: FastDump,
    ) -> None:
        self.app = app
        self.entries = entries
        self._scope = scope
        self._dump = dump
        self._digests: list[bytes] = []
        self.size = 0

    def _rows(self, batch: list[Entry]) -> dict[Any, tuple[dict[str, Any], str]]:
        query = (
            self._scope()
            .with_only_columns(*FileRecord.__table__.columns)
            .where(FileRecord.id.in_([entry.id for entry in batch]))
        )
        rows = db.session.execute(query).all()
        dumped = self._dump.dump(rows, many=True) if rows else []
        return {row.id: (item, row.checksum_sha256) for row, item in zip(rows, dumped, strict=True)}

    def _items(self, batch: list[Entry]) -> Iterator[tuple[Entry, bytes | None]]:
        rows = self._rows(batch)
        for entry in batch:
            found = rows.get(entry.id)
            yield entry, None if found is None else _item(entry, *found)

    def measure(self) -> list[Entry]:
        """Read the records once (in the request's app context): the manifest's exact size.
        Returns the entries still there."""
        kept: list[Entry] = []
        size = len(_OPEN)
        for start in range(0, len(self.entries), MANIFEST_BATCH):
            for entry, item in self._items(self.entries[start : start + MANIFEST_BATCH]):
                if item is None:
                    continue  # deleted or hidden since it was picked
                size += len(_SEPARATOR if kept else b"\n") + len(item)
                kept.append(entry)
                self._digests.append(_digest(item))
        self.entries = kept
        self.size = size + len(_close(not kept))
        return kept

    def __iter__(self) -> Iterator[bytes]:
        yield _OPEN
        for start in range(0, len(self.entries), MANIFEST_BATCH):
            batch = self.entries[start : start + MANIFEST_BATCH]
            with self.app.app_context():
                items = list(self._items(batch))
            for n, (entry, item) in enumerate(items, start):
                if item is None or _digest(item) != self._digests[n]:
                    raise ManifestChanged(f"record {entry.id} changed while its archive streamed")
                yield (_SEPARATOR if n else b"\n") + item
        yield _close(not self.entries)


class _Content:
    """One entry's bytes, opened only when the archive reaches it and closed right after, in
    the chunks downloads read (which the server's read-ahead is sized for). An object of two
    references rather than a generator: an archive holds one per file until it is sent."""

    __slots__ = ("storage", "key")

    def __init__(self, storage: Storage, key: str) -> None:
        self.storage = storage
        self.key = key

    def __iter__(self) -> Iterator[bytes]:
        with self.storage.open(self.key, chunk_size=streaming.READ_BYTES) as reader:
            yield from reader


def folder_archive(
    entries: list[Entry], manifest: Iterable[bytes], manifest_size: int, storage: Storage
) -> ZipStream:
    """The archive: the manifest first, then every file; `len()` of it is its exact size."""
    archive = ZipStream(compress_type=ZIP_STORED, sized=True)
    archive.add(iter(manifest), MANIFEST_NAME, size=manifest_size)
    for entry in entries:
        archive.add(_Content(storage, entry.stored_path), entry.name, size=entry.size)
    return archive


def archive_file_name(path: str) -> str:
    """The download's name: the last segment of the folder asked for."""
    last = [s for s in path.replace("\\", "/").split("/") if s.strip()]
    return f"{_safe_segment(last[-1]) if last else 'files'}.zip"
