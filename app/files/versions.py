"""Versions of a record's content (issue 39): the number, the history, the kept releases.

A record's `version` is 1 at creation and grows by one with each replacement that changes the
bytes; each replacement leaves a `FileVersion` row of the version it ended. Content that has
been publicly downloadable at some moment (released, embargo over) is kept under its own key
when `KEEP_RELEASED_VERSIONS` is on; content that never was is always deleted. Whether the
current content has been public is marked on the record (`content_was_public`) by every write
that could end a public moment (`note_public`, before and after a change of `freigabe` or
`sperrfrist`), and read once more at the replacement itself: between two writes nothing can
turn a public record private, while an embargo can only end, which the replacement then sees.

Every version's content lives under its own key, the current one's in the record's
`stored_path`, an ended one's in its row; nothing assumes a fixed key per record. A record's
draft (app/files/approval.py) is a row of the same table in state `draft`: nothing here
lists, keeps or serves it.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

from flask import current_app
from sqlalchemy import func, select

from app.auth.services import Caller
from app.exceptions import RecordChanged, RecordNotFound
from app.extensions import db
from app.files import access, deletions
from app.files.access import LinkHolder, RecordLike
from app.models import FileRecord, FileVersion, VersionState, utcnow

#: A content's columns, named alike on a record, a version and a draft.
CONTENT = ("stored_path", "checksum_sha256", "size", "mime_type", "original_name")
#: The public fields besides the content's (app/files/approval.py), kept with each version.
METADATA = (
    "aktiv_id",
    "path",
    "reprotyp",
    "titel",
    "beschreibung",
    "autoren",
    "sachschlagwoerter",
    "org_themen",
    "sperrfrist",
    "reihenfolge",
    # Issue 49: who made it and what it belongs to (app/schemas/attribution.py).
    "creators",
    "related_identifiers",
    "series_slug",
    "series_number",
)
#: SQL: the versions replacements ended (not a draft).
ENDED = FileVersion.state == VersionState.ENDED


def content_of(source: Any) -> dict[str, Any]:
    """The content columns of a record, a version or a draft."""
    return {name: getattr(source, name) for name in CONTENT}


def etag(record: RecordLike) -> str:
    """The record's strong entity tag (unquoted): its version and the instant of its last
    change, so every change of the row gives a new one (each write sets `updated_at`)."""
    return f"{record.version}.{record.updated_at.astimezone(UTC).strftime('%Y%m%d%H%M%S%f')}"


def check_if_match(expected: Collection[str] | None, record: RecordLike) -> None:
    """412 unless `expected` (the If-Match tags, None: no precondition) names the record as
    it is now."""
    if expected is not None and etag(record) not in expected:
        raise RecordChanged()


def note_public(record: FileRecord) -> None:
    """Mark the current content as having been public if it is so now. Called by every write
    of a record, before and after it changes, so that no public moment goes unnoticed."""
    if not record.content_was_public and access.public_now(record, access.today()):
        record.content_was_public = True


def keeping() -> bool:
    return current_app.config.get("KEEP_RELEASED_VERSIONS", "off") == "on"


def end_version(record: FileRecord, at: datetime, by: int | None, note: str | None) -> FileVersion:
    """The row of the version the replacement of `record` ends (before its columns change);
    its content is kept when it has been public and the setting says so, else the caller
    deletes it (`stored_path` None)."""
    note_public(record)
    kept = keeping() and record.content_was_public
    version = FileVersion(
        record_id=record.id,
        number=record.version,
        state=VersionState.ENDED,
        replaced_at=at,
        replaced_by=by,
        change_note=note,
        **content_of(record),
        **{name: getattr(record, name) for name in METADATA},
    )
    if not kept:
        version.stored_path = None
    db.session.add(version)
    return version


def next_version(
    record: FileRecord, content: dict[str, Any], by: int | None, note: str | None
) -> None:
    """The one replacement path: `content` (`CONTENT`'s columns) becomes the record's next
    version, the version it ends is listed, and its content kept or owed for deletion."""
    at = utcnow()
    ended = end_version(record, at, by, note)
    if ended.stored_path is None:
        deletions.owe(record.stored_path)
    for name, value in content.items():
        setattr(record, name, value)
    record.version += 1
    record.updated_at = at
    record.content_was_public = False


def kept_keys(record_id: uuid.UUID) -> list[str]:
    """The keys of every kept content of a record."""
    return list(
        db.session.scalars(
            select(FileVersion.stored_path).where(
                FileVersion.record_id == record_id, ENDED, FileVersion.stored_path.is_not(None)
            )
        )
    )


def history(
    caller: Caller, record_id: uuid.UUID, page: int, per_page: int
) -> tuple[list[FileVersion], int]:
    """One page of the ended versions of a record the caller may change (owner, admin),
    newest first, and how many there are; others get 404 as for the record."""
    access.find_record(caller, record_id)
    total = db.session.scalar(
        select(func.count())
        .select_from(FileVersion)
        .where(FileVersion.record_id == record_id, ENDED)
    )
    rows = db.session.scalars(
        select(FileVersion)
        .where(FileVersion.record_id == record_id, ENDED)
        .order_by(FileVersion.number.desc())
        .offset((page - 1) * per_page)
        .limit(per_page)
    )
    return list(rows), total or 0


def kept_versions(record_id: uuid.UUID) -> list[FileVersion]:
    """The kept versions of a record, newest first (for its landing page)."""
    return list(
        db.session.scalars(
            select(FileVersion)
            .where(FileVersion.record_id == record_id, ENDED, FileVersion.stored_path.is_not(None))
            .order_by(FileVersion.number.desc())
        )
    )


class KeptContent:
    """A kept version as downloads read a record: the same attribute names."""

    def __init__(self, record: RecordLike, version: FileVersion) -> None:
        self.id = record.id
        self.number = version.number
        self.stored_path = version.stored_path
        self.checksum_sha256 = version.checksum_sha256
        self.size = version.size
        self.mime_type = version.mime_type
        self.original_name = version.original_name


def kept_content(
    caller: Caller | LinkHolder | None, record_id: uuid.UUID, number: int
) -> KeptContent:
    """A kept version `caller` may download, by the rules of the record's current content
    (`access.downloadable_record`): through the account door the owner's and administrators'
    (others 404, as for the record); through the public door (None) while the record is
    publicly downloadable (404 unreleased, 403 under embargo). A version that was not kept,
    or does not exist, is 404."""
    record = access.downloadable_record(caller, record_id, fresh=True)
    version = db.session.get(FileVersion, (record_id, number))
    if version is None or version.state != VersionState.ENDED or version.stored_path is None:
        raise RecordNotFound("No kept content of this version.")
    return KeptContent(record, version)


def last_replaced_at(record_id: uuid.UUID) -> datetime | None:
    """When the record's current version became current by a replacement (None: never)."""
    return db.session.scalar(
        select(func.max(FileVersion.replaced_at)).where(FileVersion.record_id == record_id, ENDED)
    )
