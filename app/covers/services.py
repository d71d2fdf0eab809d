"""A record's covers: which are wanted, which is shown, and when anyone may see it (issue 50).

Every write of a record ends through `follow` (app/files/writes.py `finish`, and the release
decisions that drop a draft): the record wants a cover of its current bytes, and of the bytes
its draft waits with, where a picture can be drawn of them (a PDF's first page, an image, a
video's frame). A wanted cover is a `Cover` row written in the write's transaction, made after
the commit by the worker (making.py); a cover no longer wanted goes with its row, its
pictures owed for deletion (app/files/deletions.py). A cover pictures exactly the bytes whose
SHA-256 it names, so the record shows its owner's cover if it has one made, else the one of
its current bytes, never one of bytes it had or waits for: a change held for approval brings
its cover in with its bytes, at the approval, and a replacement shows none until the new one
is made.

A cover is shown exactly where the record's content may be downloaded (`picture`): never
while it is unreleased or under embargo (then 404, never 403: an answer must not tell that a
picture exists), to a share link's holder where the holder may download it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, BinaryIO

from flask import current_app
from sqlalchemy import bindparam, or_, select

from app.auth.services import Caller
from app.cache import RECORDS, cache_for
from app.covers import child
from app.database import PREPARED
from app.exceptions import DomainError, DownloadBlocked, RecordNotFound, ValidationFailed
from app.extensions import db
from app.files import access, approval, deletions
from app.files.access import LinkHolder, RecordLike
from app.files.uploads import discard, stage_file
from app.models import (
    DRAFT_NUMBER,
    Cover,
    CoverOrigin,
    FileRecord,
    FileVersion,
    VersionState,
    utcnow,
)
from app.storage import Storage

WIDTHS = child.WIDTHS
#: The pictures' types by the extension of their address.
FORMATS = {"webp": "image/webp", "jpg": "image/jpeg"}
#: What a cover is drawn of, by the content's type (child.py draws each kind).
KINDS = {
    "application/pdf": "pdf",
    "image/jpeg": "image",
    "image/png": "image",
    "image/gif": "image",
    "image/webp": "image",
    "video/mp4": "video",
}
#: The types an owner's cover may have (by its bytes, app/detection).
OWNER_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
#: Session.info key: this transaction made a cover due (the worker is poked after the commit).
DUE = "covers_due"


class CoverHeld(DomainError):
    """The owner's cover would change what the public sees of a released record without an
    approval (409)."""

    status = 409


def enabled() -> bool:
    return current_app.config.get("COVERS", "on") == "on"


def new_key(record_id: uuid.UUID) -> str:
    """A fresh key per cover (its pictures end `-200.webp`, ...; an owner's upload is the key
    itself)."""
    return f"covers/{record_id}/{uuid.uuid4()}"


def picture_keys(cover: Cover) -> list[str]:
    """The keys of the pictures of a made cover."""
    return [] if cover.key is None else [f"{cover.key}-{name}" for name in child.names()]


# --- which covers a record wants ----------------------------------------------------------


def _draft(record_id: uuid.UUID) -> FileVersion | None:
    """The record's draft as this write leaves it (one it added or dropped too), read
    without flushing: following a record changes nothing of when its write is sent."""
    for obj in db.session.new:
        if isinstance(obj, FileVersion) and obj.record_id == record_id:
            if obj.number == DRAFT_NUMBER and obj.state == VersionState.DRAFT:
                return obj
    draft = db.session.scalars(
        select(FileVersion).where(
            FileVersion.record_id == record_id,
            FileVersion.number == DRAFT_NUMBER,
            FileVersion.state == VersionState.DRAFT,
        )
    ).first()
    return None if draft is None or draft in db.session.deleted else draft


def _wanted(record: FileRecord) -> dict[str, tuple[str, str]]:
    """SHA-256 → (key, type) of the bytes the record wants pictured: its own, and those its
    draft waits with."""
    wanted = {}
    draft = _draft(record.id)
    sources: list[Any] = [record] + ([draft] if draft and draft.stored_path else [])
    for source in sources:
        if source.mime_type in KINDS:
            wanted[source.checksum_sha256] = (source.stored_path, source.mime_type)
    return wanted


def follow(record: FileRecord, *, deleted: bool = False) -> None:
    """Bring the record's covers to what it wants now, in the write's transaction: new ones
    due, ones no longer wanted dropped (their pictures owed); all of them when `deleted`."""
    with db.session.no_autoflush:
        _follow(record, deleted)


def _follow(record: FileRecord, deleted: bool) -> None:
    rows = db.session.scalars(select(Cover).where(Cover.record_id == record.id)).all()
    if deleted:
        for row in rows:
            drop(row)
        return
    if not enabled():
        return
    wanted = _wanted(record)
    for row in rows:
        if row.origin == CoverOrigin.CONTENT and row.source not in wanted:
            drop(row)
    have = {row.source for row in rows if row.origin == CoverOrigin.CONTENT}
    for sha256, (key, mime_type) in wanted.items():
        if sha256 not in have:
            db.session.add(
                Cover(
                    record_id=record.id,
                    origin=CoverOrigin.CONTENT,
                    source=sha256,
                    source_path=key,
                    source_type=mime_type,
                    due_at=utcnow(),
                )
            )
            db.session.info[DUE] = True


def drop(cover: Cover) -> None:
    """Remove a cover in this transaction; its pictures (and an owner's upload) are owed."""
    for key in picture_keys(cover):
        deletions.owe(key)
    if cover.origin == CoverOrigin.OWNER:
        deletions.owe(cover.source_path)
    db.session.delete(cover)


# --- which cover a record shows -----------------------------------------------------------


def _showable(record: RecordLike) -> Any:
    return (Cover.record_id == record.id) & or_(
        Cover.origin == CoverOrigin.OWNER, Cover.source == record.checksum_sha256
    )


def _best(covers: Iterable[Cover]) -> Cover | None:
    """The owner's cover wins over the derived one."""
    made = [cover for cover in covers if cover.key is not None]
    made.sort(key=lambda cover: cover.origin != CoverOrigin.OWNER)
    return made[0] if made else None


def shown(record: RecordLike) -> Cover | None:
    """The cover the record shows (made): its owner's, else its current bytes'."""
    if not enabled():
        return None
    return _best(db.session.scalars(select(Cover).where(_showable(record), Cover.key.is_not(None))))


#: The picture a record shows, for serving: built once, prepared on PostgreSQL (a lookup by
#: the record's id); the owner's first.
_SHOWN_PICTURES = (
    select(Cover.key, Cover.objects)
    .where(
        Cover.record_id == bindparam("record_id"),
        Cover.key.is_not(None),
        or_(Cover.origin == CoverOrigin.OWNER, Cover.source == bindparam("sha256")),
    )
    .order_by((Cover.origin == CoverOrigin.OWNER).desc())
    .limit(1)
    .execution_options(**{PREPARED: True})
)


def _shown_picture(record: RecordLike) -> tuple[str, dict[str, list[Any]]] | None:
    """(key, objects) of the cover the record shows, from this process's record cache where
    it keeps it (app/cache.py: a change of the record or of any cover ends the entry)."""
    cache = cache_for(RECORDS)
    key = ("cover", record.id, record.checksum_sha256)
    found, generation = (None, None) if cache is None else cache.get(RECORDS, key)
    if found is None:
        parameters = {"record_id": record.id, "sha256": record.checksum_sha256}
        row = db.session.connection().execute(_SHOWN_PICTURES, parameters).first()
        found = () if row is None else (row.key, json.loads(row.objects or "{}"))
        if generation is not None:
            cache.put(RECORDS, generation, key, found)  # type: ignore[union-attr]
    return found or None


def shown_for(records: list[Any]) -> dict[uuid.UUID, Cover]:
    """The covers these records show, by record id, in one query."""
    if not records or not enabled():
        return {}
    # One IN over the ids, the content check per row here: an OR of a condition per record
    # cost more to build than the query took.
    sha256 = {record.id: record.checksum_sha256 for record in records}
    found: dict[uuid.UUID, list[Cover]] = {}
    for cover in db.session.scalars(
        select(Cover).where(Cover.record_id.in_(list(sha256)), Cover.key.is_not(None))
    ):
        if cover.origin == CoverOrigin.OWNER or cover.source == sha256[cover.record_id]:
            found.setdefault(cover.record_id, []).append(cover)
    return {record_id: best for record_id, rows in found.items() if (best := _best(rows))}


@dataclass(frozen=True, slots=True)
class Shown:
    """What a page prints of a record's cover: its addresses (under `base`, the record's
    page address) and sizes; `version` changes with every new picture, so that a cache that
    keys by address (a social network's preview) fetches the new one."""

    base: str
    version: str
    width: int
    height: int

    def url(self, width: int, ext: str, *, versioned: bool = True) -> str:
        """The picture's address; `versioned` adds the tag (podcast apps want an address
        ending in `.jpg`)."""
        plain = f"{self.base}/cover/{width}.{ext}"
        return f"{plain}?v={self.version}" if versioned else plain

    def height_at(self, width: int) -> int:
        return child.height_for(width, self.width, self.height)


def shown_at(cover: Cover | None, page: str) -> Shown | None:
    """What a page at `page` (the record's address) prints of `cover`."""
    if cover is None or cover.key is None:
        return None
    version = cover.key.rpartition("/")[2][:12]
    return Shown(page, version, cover.width or 1, cover.height or 1)


# --- serving ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Picture:
    """One stored picture as a download reads a record (app/files/downloads.py)."""

    id: uuid.UUID
    stored_path: str
    checksum_sha256: str
    size: int
    mime_type: str
    original_name: str


def picture(
    caller: Caller | LinkHolder | None, record_id: uuid.UUID, width: int, ext: str
) -> Picture:
    """The picture `width` wide of the record's cover, as `caller` (None: the public) may
    have it: only while they may download the record's content (`access`), else 404, as for
    a record without a cover or a size not made."""
    if width not in WIDTHS or ext not in FORMATS:
        raise RecordNotFound("No such picture.")
    record = access.read_record(caller, record_id)
    try:
        access.check_downloadable(caller, record, access.today())
    except DownloadBlocked:
        raise RecordNotFound() from None
    found = _shown_picture(record) if enabled() else None
    if found is None:
        raise RecordNotFound("This record has no cover.")
    key, objects = found
    name = f"{width}.{ext}"
    size, sha256 = objects[name]
    return Picture(record.id, f"{key}-{name}", sha256, size, FORMATS[ext], f"{record.id}-{name}")


# --- the owner's cover --------------------------------------------------------------------


def _refuse_released(record: FileRecord) -> None:
    """With RELEASE_APPROVAL on, a released record's cover changes only with its release
    (409): a cover is what the public sees first."""
    if approval.enabled() and record.freigabe:
        raise CoverHeld(
            "The record is released and RELEASE_APPROVAL is on: its cover would change what "
            "the public sees without an approval. Unrelease it, change the cover, and ask for "
            "its release again."
        )


def _held(record: FileRecord, caller_id: int) -> None:
    """The release rule (app/files/approval.py) for a cover, under the record's lock: refused
    for a released record (`_refuse_released`); a pending request to release it is bound
    anew, as after any change of what it would make public."""
    _refuse_released(record)
    pending = approval.pending_request(record.id) if approval.enabled() else None
    if pending is not None:
        approval.note_editor(record.id, caller_id)
        approval.cancel(pending, caller_id, "cover changed", {"cover": ["", "changed"]})
        approval.open_request(record, caller_id)


def _commit(storage: Storage) -> None:
    owed = deletions.take_owed()
    try:
        db.session.commit()
    except BaseException:
        db.session.rollback()
        raise
    deletions.carry_out(storage, owed)


def owner_cover(record_id: uuid.UUID) -> Cover | None:
    return db.session.scalars(
        select(Cover).where(Cover.record_id == record_id, Cover.origin == CoverOrigin.OWNER)
    ).first()


def upload(caller: Caller, record_id: uuid.UUID, stream: BinaryIO, storage: Storage) -> Cover:
    """The owner's (or an administrator's) picture for the record, copied from `stream` as
    every upload is (counted, hashed, limited to `COVER_MAX_KB`, its type from its bytes): it
    replaces the owner's cover there was, and its pictures are made after the commit."""
    _refuse_released(access.find_record(caller, record_id))
    db.session.rollback()  # no transaction stays open while the body streams in
    key = new_key(record_id)
    limit = current_app.config["COVER_MAX_KB"] * 1024
    staged = stage_file(stream, "cover", storage.writer(key), max_size=limit, field="cover")
    if staged.error is None and staged.mime_type not in OWNER_TYPES:
        discard([staged], storage)
        staged.error = "The cover must be a JPEG, PNG, GIF or WebP image."
    if staged.error is not None:
        raise ValidationFailed({"cover": [staged.error]})
    try:
        record = access.find_record(caller, record_id, lock=True)
        _held(record, caller.id)
        if (old := owner_cover(record_id)) is not None:
            drop(old)
        cover = Cover(
            record_id=record_id,
            origin=CoverOrigin.OWNER,
            source=staged.sha256,
            source_path=key,
            source_type=staged.mime_type,
            due_at=utcnow(),
        )
        db.session.add(cover)
        db.session.info[DUE] = True
        _commit(storage)
    except BaseException:
        deletions.take_owed()
        db.session.rollback()
        discard([staged], storage)
        raise
    return cover


def remove(caller: Caller, record_id: uuid.UUID, storage: Storage) -> None:
    """Remove the owner's cover (404 when there is none); the derived one shows again."""
    record = access.find_record(caller, record_id, lock=True)
    cover = owner_cover(record_id)
    if cover is None:
        raise RecordNotFound("This record has no cover of its owner.")
    _held(record, caller.id)
    drop(cover)
    _commit(storage)


def status(caller: Caller, record_id: uuid.UUID) -> dict[str, Any]:
    """What the record's owner learns of its cover: which one it shows, and of each it has
    whether it is made, waiting or failed (and why)."""
    record = access.find_record(caller, record_id)
    rows = db.session.scalars(select(Cover).where(Cover.record_id == record_id)).all()
    current = [
        r for r in rows if r.origin == CoverOrigin.OWNER or r.source == record.checksum_sha256
    ]
    best = _best(current) if enabled() else None
    return {
        "shown": None if best is None else best.origin,
        "covers": [
            {
                "origin": row.origin,
                "sha256": row.source,
                "state": "made" if row.key else ("waiting" if row.due_at else "failed"),
                "current": row in current,
                "width": row.width,
                "height": row.height,
                "error": row.last_error,
            }
            for row in sorted(rows, key=lambda row: (row.origin, row.created_at))
        ],
    }
