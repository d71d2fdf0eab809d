"""Which records a folder archive holds, under which entry names, and the archive itself.

Who may see and download a record is decided by the rules of app/files/access.py (through
`Listing` and `access.downloadable`); this module only picks, names and packs. The archive is a
ZIP of stored (uncompressed) entries, so its length is known before the first byte and every
entry streams from storage as it is read: memory stays at one storage chunk, whatever the
number and size of the files.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from typing import Any

from sqlalchemy import Row
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


@dataclass(frozen=True)
class ArchiveLimits:
    max_files: int
    max_bytes: int


@dataclass(frozen=True)
class Entry:
    name: str
    record: Row[Any]


def _too_big(message: str) -> ValidationFailed:
    return ValidationFailed({"path": [message]})


def downloadable_records(
    user: Caller | None, path: str, today: date, limits: ArchiveLimits
) -> list[Row[Any]]:
    """The records under `path` that `user` (None: the public) may download today, in folder
    and upload order; more than the limits allow is a validation error on `path`."""
    # An empty path means every folder, records without a path included (as in the lists).
    listing = Listing.of(user, {"path": path} if path else {})
    query = (
        listing.query()
        .where(access.downloadable(user, today))
        .with_only_columns(*FileRecord.__table__.columns)
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


def entry_names(records: list[Row[Any]]) -> list[Entry]:
    """Each record at `<its path>/<original name>`: relative, without `..`, unique (a repeated
    name within a folder, compared case-insensitively, becomes `name (2).ext`)."""
    taken = {MANIFEST_NAME.casefold()}
    entries = []
    for record in records:
        folders = [_safe_segment(s) for s in (record.path or "").split("/") if s]
        folder = "".join(f"{s}/" for s in folders)
        name = _safe_segment(record.original_name)
        candidate, n = folder + name, 1
        while candidate.casefold() in taken:
            n += 1
            candidate = folder + _numbered(name, n)
        taken.add(candidate.casefold())
        entries.append(Entry(candidate, record))
    return entries


def manifest(entries: list[Entry], dump: FastDump) -> bytes:
    """The records' metadata as the API shows them, with each entry's name and SHA-256."""
    rows = dump.dump([entry.record for entry in entries], many=True) if entries else []
    items = [
        {"entry": entry.name, "sha256": entry.record.checksum_sha256, **row}
        for entry, row in zip(entries, rows, strict=True)
    ]
    return json.dumps({"files": items}, ensure_ascii=False, indent=2).encode("utf-8") + b"\n"


def _content(storage: Storage, key: str) -> Iterator[bytes]:
    """One entry's bytes, opened only when the archive reaches it and closed right after, in
    the chunks downloads read (which the server's read-ahead is sized for)."""
    with storage.open(key, chunk_size=streaming.READ_BYTES) as reader:
        yield from reader


def folder_archive(entries: list[Entry], manifest_bytes: bytes, storage: Storage) -> ZipStream:
    """The archive: the manifest first, then every file; `len()` of it is its exact size."""
    archive = ZipStream(compress_type=ZIP_STORED, sized=True)
    archive.add(manifest_bytes, MANIFEST_NAME)
    for entry in entries:
        archive.add(_content(storage, entry.record.stored_path), entry.name, size=entry.record.size)
    return archive


def archive_file_name(path: str) -> str:
    """The download's name: the last segment of the folder asked for."""
    last = [s for s in path.replace("\\", "/").split("/") if s.strip()]
    return f"{_safe_segment(last[-1]) if last else 'files'}.zip"
