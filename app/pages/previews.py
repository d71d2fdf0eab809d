"""Previews that read stored content: the first rows of a CSV, bounded in bytes and rows, so
a page never reads (or holds) more than a small prefix of the file, whatever its size."""

from __future__ import annotations

import csv
import io
import logging

from app.pages.records import clean_text
from app.storage import Storage, StorageError

log = logging.getLogger(__name__)

#: Bytes of a CSV read for its table; the rows must fit in them.
CSV_PREVIEW_BYTES = 64 * 1024
CSV_PREVIEW_ROWS = 20
CSV_PREVIEW_COLUMNS = 20
CSV_DELIMITERS = ",;\t|"


def csv_rows(storage: Storage, stored_path: str, size: int) -> list[list[str]]:
    """The first rows of a CSV (the header included), complete rows only; none when the
    content cannot be read, so the page still shows its metadata."""
    if size == 0:
        return []
    try:
        with storage.open(stored_path, 0, min(size, CSV_PREVIEW_BYTES) - 1) as reader:
            sample = reader.read_all()
    except StorageError as exc:
        log.warning("no CSV preview of %s: %s", stored_path, exc)
        return []
    text = sample.decode("utf-8-sig", errors="replace")
    if size > CSV_PREVIEW_BYTES:
        text = text.rpartition("\n")[0]  # the last line may be cut
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(
            text[:4096], delimiters=CSV_DELIMITERS
        )
    except csv.Error:
        dialect = csv.excel
    rows: list[list[str]] = []
    try:
        for row in csv.reader(io.StringIO(text, newline=""), dialect):
            if len(rows) == CSV_PREVIEW_ROWS:
                break
            rows.append([clean_text(cell) for cell in row[:CSV_PREVIEW_COLUMNS]])
    except csv.Error:
        pass  # a malformed row ends the preview; the rows before it stand
    return rows
