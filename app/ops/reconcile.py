"""Keeping the database and the bucket in agreement: `flask storage reconcile` and `verify`.

Normal operation never leaves an object without a record for long: uploads remove their
objects when they fail, and deletions owed after a row change are recorded with it. What a
killed process or a lost connection can still leave behind is found and removed here.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import click
from flask import current_app
from flask.cli import with_appcontext
from sqlalchemy import select

from app.covers import child
from app.covers import services as covers
from app.extensions import db
from app.files.deletions import retry as retry_pending_deletions
from app.models import (
    DRAFT_NUMBER,
    Cover,
    CoverOrigin,
    FileRecord,
    FileVersion,
    PendingObjectDeletion,
)
from app.storage import (
    WRITE_PROBE_KEY,
    ObjectNotFound,
    Storage,
    StorageError,
    StoredObject,
    UnfinishedUpload,
)
from app.tus.services import abort_expired, live_keys, remove_orphaned_pieces

BATCH = 500
#: In place of a version number: the new bytes of a change waiting for approval.
WAITING = "waiting"
#: The prefixes of the service's objects: contents (records, versions, drafts) and covers.
PREFIXES = ("files/", "covers/")


@dataclass
class ReconcileReport:
    orphaned: list[StoredObject] = field(default_factory=list)
    young_orphans: int = 0
    #: (record id, version number, None for the current content or WAITING, key)
    missing: list[tuple[uuid.UUID, int | str | None, str]] = field(default_factory=list)
    pending_done: int = 0
    pending_failed: int = 0
    abandoned_removed: int = 0
    orphans_removed: int = 0
    expired_uploads: int = 0
    expired_failed: int = 0
    orphaned_pieces: int = 0
    unfinished: list[UnfinishedUpload] = field(default_factory=list)


def _batches(items: Iterable, size: int = BATCH) -> Iterator[list]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def _referenced(keys: list[str]) -> set[str]:
    """Keys among `keys` that a record, a kept version, a draft (new bytes waiting for
    approval) or a cover (its pictures, an owner's upload) points at, or whose deletion is
    already owed."""
    records = db.session.scalars(
        select(FileRecord.stored_path).where(FileRecord.stored_path.in_(keys))
    )
    kept = db.session.scalars(
        select(FileVersion.stored_path).where(FileVersion.stored_path.in_(keys))
    )
    owed = db.session.scalars(
        select(PendingObjectDeletion.key).where(PendingObjectDeletion.key.in_(keys))
    )
    # A picture's key is its cover's key and its name (`<key>-200.webp`).
    prefixes = {key.rpartition("-")[0] for key in keys if key.startswith("covers/")}
    pictures = db.session.scalars(select(Cover).where(Cover.key.in_(prefixes)))
    uploads = db.session.scalars(select(Cover.source_path).where(Cover.source_path.in_(keys)))
    named = {key for cover in pictures for key in covers.picture_keys(cover)}
    return set(records) | set(kept) | set(owed) | named | set(uploads)


def reconcile(storage: Storage, grace: timedelta, fix: bool) -> ReconcileReport:
    """Compare bucket and records; with `fix`, carry out owed deletions, discard abandoned
    unfinished writes and remove orphaned objects older than `grace`."""
    report = ReconcileReport()
    cutoff = datetime.now(UTC) - grace
    if fix:
        report.pending_done, report.pending_failed = retry_pending_deletions(storage)
        now = datetime.now(UTC)
        report.expired_uploads, report.expired_failed = abort_expired(storage, now)
        report.orphaned_pieces = remove_orphaned_pieces(storage, cutoff)
    report.unfinished = list(storage.unfinished_uploads(cutoff, keep=live_keys()))
    if fix:
        for upload in report.unfinished:
            storage.discard_unfinished_upload(upload)
        report.abandoned_removed = len(report.unfinished)

    objects = itertools.chain.from_iterable(storage.iter_objects(p) for p in PREFIXES)
    for batch in _batches(objects):
        referenced = _referenced([obj.key for obj in batch])
        for obj in batch:
            if obj.key in referenced or obj.key == WRITE_PROBE_KEY:
                # The readiness probe's object: written and deleted again by /readyz.
                continue
            if obj.modified > cutoff:
                # Possibly an upload whose record is being written right now.
                report.young_orphans += 1
                continue
            report.orphaned.append(obj)
            if fix:
                storage.delete(obj.key)
                report.orphans_removed += 1
        db.session.rollback()

    for record_id, number, key, _size, _checksum in _stored_contents(None):
        if not storage.exists(key):
            report.missing.append((record_id, number, key))
    for record_id, key, _size, _checksum in _stored_pictures(None):
        if not storage.exists(key):
            report.missing.append((record_id, COVER, key))
    return report


def _stored_contents(
    record_ids: list[uuid.UUID] | None,
) -> Iterator[tuple[uuid.UUID, int | str | None, str, int, str]]:
    """Every stored content the database names: each record's current one (number None),
    the kept versions (versions.py) and the drafts' new bytes (number WAITING), as (record id,
    number, key, size, SHA-256)."""
    current = select(
        FileRecord.id, FileRecord.stored_path, FileRecord.size, FileRecord.checksum_sha256
    ).order_by(FileRecord.id)
    kept = (
        select(
            FileVersion.record_id,
            FileVersion.number,
            FileVersion.stored_path,
            FileVersion.size,
            FileVersion.checksum_sha256,
        )
        .where(FileVersion.stored_path.is_not(None))
        .order_by(FileVersion.record_id, FileVersion.number)
    )
    if record_ids:
        current = current.where(FileRecord.id.in_(record_ids))
        kept = kept.where(FileVersion.record_id.in_(record_ids))
    for record_id, key, size, checksum in db.session.execute(current).yield_per(BATCH):
        yield record_id, None, key, size, checksum
    for record_id, number, key, size, checksum in db.session.execute(kept).yield_per(BATCH):
        yield record_id, WAITING if number == DRAFT_NUMBER else number, key, size, checksum


#: In place of a version number: a cover's picture (or its owner's upload).
COVER = "cover"


def _stored_pictures(
    record_ids: list[uuid.UUID] | None,
) -> Iterator[tuple[uuid.UUID, str, int | None, str | None]]:
    """Every cover picture the database names (record id, key, size, SHA-256), and every
    owner's upload (record id, key, None, its SHA-256)."""
    query = select(Cover).order_by(Cover.record_id, Cover.id)
    if record_ids:
        query = query.where(Cover.record_id.in_(record_ids))
    for cover in db.session.scalars(query).all():
        if cover.origin == CoverOrigin.OWNER:
            yield cover.record_id, cover.source_path, None, cover.source
        objects = json.loads(cover.objects or "{}")
        for name, key in zip(child.names(), covers.picture_keys(cover), strict=False):
            size, checksum = objects.get(name, (None, None))
            yield cover.record_id, key, size, checksum


def _label(record_id: uuid.UUID, number: int | str | None) -> str:
    if number is None:
        return f"{record_id}"
    if number == COVER:
        return f"{record_id} cover"
    if number == WAITING:
        return f"{record_id} change waiting for approval"
    return f"{record_id} version {number}"


@dataclass
class VerifyResult:
    checked: int = 0
    checked_versions: int = 0
    checked_waiting: int = 0
    checked_pictures: int = 0
    bytes: int = 0
    problems: list[str] = field(default_factory=list)


def verify(storage: Storage, record_ids: list[uuid.UUID] | None = None) -> VerifyResult:
    """Re-read objects (each record's current content and its kept versions) and compare size
    and SHA-256 with what was recorded at upload; an id of `record_ids` that names no record
    is a problem too."""
    result = VerifyResult()
    unknown = dict.fromkeys(record_ids or ())
    stored: list[tuple[uuid.UUID, int | str | None, str, int | None, str | None]] = list(
        _stored_contents(record_ids)
    )
    stored += [(r, COVER, key, size, sha) for r, key, size, sha in _stored_pictures(record_ids)]
    for record_id, number, key, size, checksum in stored:
        if number == COVER:
            result.checked_pictures += 1
        elif number is None:
            result.checked += 1
        elif number == WAITING:
            result.checked_waiting += 1
        else:
            result.checked_versions += 1
        unknown.pop(record_id, None)
        label = _label(record_id, number)
        digest, length = hashlib.sha256(), 0
        try:
            reader = storage.open(key)
            try:
                for chunk in reader:
                    digest.update(chunk)
                    length += len(chunk)
            finally:
                reader.close()
        except ObjectNotFound:
            result.problems.append(f"{label}: object {key} is missing")
            continue
        result.bytes += length
        if size is not None and length != size:
            result.problems.append(f"{label}: size {length} bytes, recorded {size}")
        elif digest.hexdigest() != checksum:
            result.problems.append(f"{label}: content does not match its SHA-256 (changed)")
    result.problems.extend(f"{record_id}: no record has this id" for record_id in unknown)
    return result


@click.command("reconcile")
@click.option("--fix", is_flag=True, help="Remove orphaned objects and finish owed deletions.")
@click.option(
    "--grace-minutes",
    type=click.IntRange(min=0),
    default=60,
    show_default=True,
    help="Leave objects and unfinished uploads younger than this alone (uploads in flight).",
)
@with_appcontext
def reconcile_command(fix: bool, grace_minutes: int) -> None:
    """List objects without records and records without objects; --fix repairs what it can.

    Exit status 1 when records without objects remain (their content is lost and needs an
    operator), or when owed deletions still fail.
    """
    storage: Storage = current_app.extensions["storage"]
    try:
        report = reconcile(storage, timedelta(minutes=grace_minutes), fix)
    except StorageError as exc:
        raise click.ClickException(f"storage: {exc}") from None
    for obj in report.orphaned:
        action = "removed" if fix else "orphaned"
        click.echo(f"{action} object {obj.key} ({obj.size} bytes, {obj.modified:%Y-%m-%d %H:%M})")
    for record_id, number, key in report.missing:
        click.echo(f"record {_label(record_id, number)} has no object ({key})")
    for upload in report.unfinished:
        action = "discarded" if fix else "abandoned"
        click.echo(
            f"{action} unfinished upload {upload.name} (started {upload.started:%Y-%m-%d %H:%M})"
        )
    click.echo(
        f"orphaned objects: {len(report.orphaned)}"
        + (f" (removed {report.orphans_removed})" if fix else " (run with --fix to remove)")
        + f"; younger than {grace_minutes} min, left alone: {report.young_orphans}"
    )
    click.echo(f"records without objects: {len(report.missing)}")
    if not fix:
        click.echo(
            f"abandoned unfinished uploads: {len(report.unfinished)}"
            + (" (run with --fix to discard)" if report.unfinished else "")
        )
    if fix:
        click.echo(
            f"owed deletions done: {report.pending_done}, still failing: "
            f"{report.pending_failed}; abandoned unfinished uploads removed: "
            f"{report.abandoned_removed}"
        )
        click.echo(
            f"expired resumable uploads aborted: {report.expired_uploads}, still failing: "
            f"{report.expired_failed}; pieces without an upload removed: "
            f"{report.orphaned_pieces}"
        )
    if report.missing or report.pending_failed or report.expired_failed:
        raise SystemExit(1)


@click.command("verify")
@click.option(
    "--record", "records", multiple=True, type=click.UUID, help="Only this record (repeatable)."
)
@with_appcontext
def verify_command(records: tuple[uuid.UUID, ...]) -> None:
    """Re-read stored content and report any whose bytes no longer match (bit rot, tampering)."""
    storage: Storage = current_app.extensions["storage"]
    try:
        result = verify(storage, list(records) or None)
    except StorageError as exc:
        raise click.ClickException(f"storage: {exc}") from None
    for problem in result.problems:
        click.echo(problem)
    click.echo(
        f"checked {result.checked} records and {result.checked_versions} kept versions "
        + (f"and {result.checked_waiting} waiting changes " if result.checked_waiting else "")
        + (f"and {result.checked_pictures} cover pictures " if result.checked_pictures else "")
        + f"({result.bytes} bytes): "
        f"{len(result.problems)} problem(s)"
    )
    if result.problems:
        raise SystemExit(1)
