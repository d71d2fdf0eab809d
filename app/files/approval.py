"""The release rule of `RELEASE_APPROVAL=on` (issue 38), where records change.

Every write of a record (create, PATCH, content replacement, tus completion, `flask import`,
delete) calls `before_commit` (a replacement of a released record `hold_content`) once its
changes are set on the ORM object and before it commits, so the rule and the change share one
transaction. With the setting off it does nothing.

With it on, nothing makes `freigabe` true but an approval (app/releases):
- a create or PATCH asking for `freigabe: true` stores the record unreleased and opens a
  release request bound to its content (SHA-256) and the hash of its public fields;
- a change of the content or the public fields of an unreleased record cancels its pending
  request (with what changed), and its author may no longer approve it (`ReleaseEditor`);
- a released record keeps what the public sees, because the record's own columns keep the
  approved state: a new content (stored under its own key) or new public field values wait
  on a pending request of kind `change` (`sperrfrist` when an earlier embargo is all it
  asks), bound to the new bytes' SHA-256 and the hash of the public fields as they would be,
  and the approval swaps them in (app/files/writes.py `apply_approved_change`). A further
  change supersedes it: the new request holds the old wish plus the new one, and bytes no
  request holds any more are deleted. A later `sperrfrist` and fields the public does not see
  change at once; `freigabe: false` unreleases at once and drops what waited.
Keys of pending bytes a change drops are owed deletions (`PendingObjectDeletion`) in the same
transaction; the caller deletes them after its commit (`take_discarded`).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import date
from typing import Any

from flask import current_app
from sqlalchemy import inspect, select

from app.exceptions import DomainError
from app.extensions import db
from app.models import (
    FileRecord,
    PendingObjectDeletion,
    ReleaseEditor,
    ReleaseRequest,
    utcnow,
)

#: What the public sees of a record besides its bytes (the public answer's fields but the
#: id, the timestamps and `freigabe`): a request binds their hash, any change cancels it.
PUBLIC_FIELDS = (
    "original_name",
    "mime_type",
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
)
CONTENT = "checksum_sha256"
#: Not public, but set by the approval: on a released record only an approval changes it.
APPROVER_NAME = "freigegeben_von"
PENDING = "pending"
#: Kinds of request that hold a change of a released record (the others: `release`).
HELD = ("change", "sperrfrist")
_DISCARDED = "approval_discarded_keys"


class ReleasedRecordChange(DomainError):
    """A change of a released record that only an approval makes (`freigegeben_von`, 409)."""

    status = 409


class WaitingChangeConflict(DomainError):
    """A held change would supersede a change someone else waits with (409): the ETag does not
    move with a held change, so If-Match alone cannot tell that one waits."""

    status = 409

    def __init__(self, request: ReleaseRequest) -> None:
        super().__init__(
            f"Release request {request.id} holds another user's change of this record, "
            "waiting for approval; it is not superseded silently. Wait for its decision, or "
            f"cancel it first (POST /api/release-requests/{request.id}/cancel: its submitter, the "
            "record's owner or an administrator), then send your change again."
        )


def _refuse_superseding_others(pending: ReleaseRequest | None, caller_id: int | None) -> None:
    """Only its submitter (or an operator command) supersedes a waiting change."""
    if (
        pending is not None
        and caller_id is not None
        and pending.submitted_by is not None
        and pending.submitted_by != caller_id
    ):
        raise WaitingChangeConflict(pending)


@dataclass(frozen=True)
class PendingContent:
    """New bytes waiting for approval beside a released record's, as downloads read a record."""

    id: uuid.UUID
    stored_path: str
    checksum_sha256: str
    size: int
    mime_type: str
    original_name: str
    change_note: str | None = None


def enabled() -> bool:
    return current_app.config.get("RELEASE_APPROVAL") == "on"


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, date) else value


def public_hash(
    record: FileRecord,
    fields: dict[str, Any] | None = None,
    content: PendingContent | None = None,
) -> str:
    """SHA-256 of the public fields' values, as canonical JSON: the record's, or with `fields`
    and `content` (a held change) as they would be after its approval."""
    values = {name: _plain(getattr(record, name)) for name in PUBLIC_FIELDS}
    values.update({name: _plain(value) for name, value in (fields or {}).items()})
    if content is not None:
        values["original_name"] = content.original_name
        values["mime_type"] = content.mime_type
    text = json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def wanted_fields(request: ReleaseRequest) -> dict[str, Any]:
    """The public fields a held change sets on approval, as the record's columns take them."""
    if request.pending_fields is None:
        # A `sperrfrist` request opened before the fields were kept (migration 0025).
        return {"sperrfrist": request.sperrfrist} if request.kind == "sperrfrist" else {}
    values = json.loads(request.pending_fields)
    if isinstance(values.get("sperrfrist"), str):
        values["sperrfrist"] = date.fromisoformat(values["sperrfrist"])
    return values


def wanted_content(request: ReleaseRequest) -> PendingContent | None:
    """The bytes a held change puts in place on approval (None: it keeps the content)."""
    if request.pending_stored_path is None:
        return None
    return PendingContent(
        id=request.record_id,
        stored_path=request.pending_stored_path,
        checksum_sha256=request.content_sha256,
        size=request.pending_size or 0,
        mime_type=request.pending_mime_type or "application/octet-stream",
        original_name=request.pending_original_name or "",
        change_note=request.pending_change_note,
    )


def bound_matches(record: FileRecord, request: ReleaseRequest) -> bool:
    """Whether `record` with `request`'s held change is exactly what the request is bound
    to (its content's SHA-256, its public fields' hash), and, of a held change, whether the
    record is still what the change starts from (else approving would undo a change made
    meanwhile, with the setting off)."""
    if request.base_sha256 is not None and (
        record.checksum_sha256 != request.base_sha256 or public_hash(record) != request.base_hash
    ):
        return False
    content = wanted_content(request)
    fields = json.loads(request.pending_fields) if request.pending_fields else None
    sha = record.checksum_sha256 if content is None else content.checksum_sha256
    return sha == request.content_sha256 and public_hash(record, fields, content) == (
        request.public_hash
    )


def pending_request(record_id: uuid.UUID) -> ReleaseRequest | None:
    return db.session.scalars(
        select(ReleaseRequest).where(
            ReleaseRequest.record_id == record_id, ReleaseRequest.state == PENDING
        )
    ).first()


def open_request(
    record: FileRecord,
    submitter_id: int | None,
    note: str | None = None,
    *,
    kind: str = "release",
    sperrfrist: date | None = None,
    fields: dict[str, Any] | None = None,
    content: PendingContent | None = None,
) -> ReleaseRequest:
    """A pending request bound to what `record` holds now (its changes set, not yet sent),
    or, of a held change (`fields`, `content`), to what it will hold after the approval."""
    request = ReleaseRequest(
        id=uuid.uuid4(),
        record_id=record.id,
        kind=kind,
        sperrfrist=sperrfrist,
        state=PENDING,
        note=note,
        content_sha256=record.checksum_sha256 if content is None else content.checksum_sha256,
        public_hash=public_hash(record, fields, content),
        submitted_by=submitter_id,
        submitted_at=utcnow(),
        override=False,
    )
    if kind in HELD:
        request.base_sha256 = record.checksum_sha256
        request.base_hash = public_hash(record)
        request.pending_fields = json.dumps(
            {name: _plain(value) for name, value in (fields or {}).items()},
            sort_keys=True,
            ensure_ascii=False,
        )
    if content is not None:
        request.pending_stored_path = content.stored_path
        request.pending_size = content.size
        request.pending_mime_type = content.mime_type
        request.pending_original_name = content.original_name
        request.pending_change_note = content.change_note
    db.session.add(request)
    return request


def drop_content(request: ReleaseRequest, keep: str | None = None) -> None:
    """Owe the deletion of `request`'s pending bytes (unless a new request takes them over,
    `keep`), in this transaction; the caller deletes them after its commit."""
    key = request.pending_stored_path
    if key is not None and key != keep:
        db.session.add(PendingObjectDeletion(key=key))
        db.session.info.setdefault(_DISCARDED, []).append(key)


def take_discarded() -> list[str]:
    """The keys of pending bytes this transaction dropped (call before the commit, delete
    them after it)."""
    return db.session.info.pop(_DISCARDED, [])


def cancel(
    request: ReleaseRequest,
    by: int | None,
    reason: str,
    changes: dict[str, list[Any]] | None = None,
    *,
    keep: str | None = None,
) -> None:
    """Cancel a pending request; its pending bytes go unless a new request keeps them."""
    drop_content(request, keep)
    request.state = "cancelled"
    request.decided_by = by
    request.decided_at = utcnow()
    request.reason = reason
    if changes:
        request.changes = json.dumps(changes, sort_keys=True, ensure_ascii=False)


def note_editor(record_id: uuid.UUID, user_id: int | None) -> None:
    if user_id is not None and db.session.get(ReleaseEditor, (record_id, user_id)) is None:
        db.session.add(ReleaseEditor(record_id=record_id, user_id=user_id))


def _changed(record: FileRecord, names: tuple[str, ...]) -> dict[str, list[Any]]:
    state = inspect(record)
    found = {}
    for name in names:
        history = state.attrs[name].history
        if history.has_changes():
            old = history.deleted[0] if history.deleted else None
            new = history.added[0] if history.added else None
            if old != new:
                found[name] = [_plain(old), _plain(new)]
    return found


def _was(record: FileRecord, name: str) -> Any:
    history = inspect(record).attrs[name].history
    return history.deleted[0] if history.deleted else getattr(record, name)


def earlier(new: date | None, old: date | None) -> bool:
    """Whether embargo `new` ends before embargo `old` (None: no embargo, the earliest)."""
    if old is None:
        return False
    return new is None or new < old


def before_commit(
    record: FileRecord,
    caller_id: int | None,
    *,
    new: bool = False,
    touched: Collection[str] = (),
) -> None:
    """Apply the release rule to `record`'s pending changes (see the module's docstring);
    `caller_id` is who makes them (None: an operator command), `touched` the fields the
    write set (a field set to the value it has is no change, but withdraws its waiting one)."""
    if not enabled():
        return
    # No query may flush the changes before their history is read.
    with db.session.no_autoflush:
        _apply_rule(record, caller_id, new, touched)


def _apply_rule(
    record: FileRecord, caller_id: int | None, new: bool, touched: Collection[str]
) -> None:
    if new:
        if record.freigabe is not False:
            record.freigabe = False
            open_request(record, caller_id)  # a create's caller is the record's owner
        return
    changes = _changed(record, (CONTENT, *PUBLIC_FIELDS))
    pending = pending_request(record.id)
    if _was(record, "freigabe"):
        if record.freigabe is False:
            if pending is not None:
                cancel(pending, caller_id, "unreleased", changes)
            if changes:
                note_editor(record.id, caller_id)
            return
        if _changed(record, (APPROVER_NAME,)):
            raise ReleasedRecordChange(
                "The record is released and RELEASE_APPROVAL is on: only an approval sets "
                "freigegeben_von."
            )
        _hold_fields(record, caller_id, changes, pending, touched)
        return
    if changes:
        note_editor(record.id, caller_id)
        if pending is not None:
            cancel(pending, caller_id, "changed", changes)
            pending = None
    if record.freigabe:
        record.freigabe = False
        if pending is None:
            open_request(record, caller_id)


def _hold_fields(
    record: FileRecord,
    caller_id: int | None,
    changes: dict[str, list[Any]],
    pending: ReleaseRequest | None,
    touched: Collection[str],
) -> None:
    """A PATCH of a released record: its public fields keep their approved values and the new
    ones wait on a request (with what already waited), but a later `sperrfrist`, which
    applies at once. A field set back to its approved value no longer waits."""
    fields = wanted_fields(pending) if pending is not None else {}
    back = {
        name: [_plain(fields.pop(name)), _plain(getattr(record, name))]
        for name in touched
        if name in fields and name not in changes
    }
    if not changes and not back:
        return
    content = wanted_content(pending) if pending is not None else None
    applied = False
    for name in changes:
        approved, new = _was(record, name), getattr(record, name)
        if name == "sperrfrist" and not earlier(new, approved):
            fields.pop(name, None)
            applied = True
            continue
        setattr(record, name, approved)
        fields[name] = new
    if pending is not None and not applied and fields == wanted_fields(pending):
        # The same wish again (a client saving what it sent before): the request stays.
        _keep_updated_at(record)
        return
    if pending is not None and fields != wanted_fields(pending):
        _refuse_superseding_others(pending, caller_id)
    withdrawn = bool(back) and not fields and content is None and not applied
    _supersede(
        record,
        caller_id,
        pending,
        fields,
        content,
        {**back, **changes},
        reason="withdrawn by a change back" if withdrawn else None,
    )
    if not applied:
        _keep_updated_at(record)


def _keep_updated_at(record: FileRecord) -> None:
    """A write that only held a change leaves the record, `updated_at` (and the ETag)
    included, as the public sees it."""
    state = inspect(record)
    touched = [
        attr.key
        for attr in state.attrs
        if attr.key != "updated_at"
        and attr.history.has_changes()
        and list(attr.history.added) != list(attr.history.deleted)
    ]
    if not touched:
        record.updated_at = _was(record, "updated_at")


def _supersede(
    record: FileRecord,
    caller_id: int | None,
    pending: ReleaseRequest | None,
    fields: dict[str, Any],
    content: PendingContent | None,
    changes: dict[str, list[Any]],
    *,
    reason: str | None = None,
) -> None:
    """Replace the record's pending request by one holding `fields` and `content` (none if
    both are empty); bytes the new one does not hold are dropped."""
    note_editor(record.id, caller_id)
    keep = None if content is None else content.stored_path
    if pending is not None:
        if reason is None:
            reason = "superseded by a new change" if fields or content else "changed"
        cancel(pending, caller_id, reason, changes, keep=keep)
    if not fields and content is None:
        return
    only_embargo = content is None and set(fields) == {"sperrfrist"}
    open_request(
        record,
        caller_id,
        kind="sperrfrist" if only_embargo else "change",
        sperrfrist=fields["sperrfrist"] if only_embargo else None,
        fields=fields,
        content=content,
    )


def holds_changes(record: FileRecord) -> bool:
    """Whether a change of `record`'s content or public fields waits for an approval."""
    return enabled() and bool(record.freigabe)


def hold_content(record: FileRecord, caller_id: int | None, content: PendingContent) -> bool:
    """A replacement of a released record (locked, `holds_changes`): the new bytes wait on a
    request beside the approved ones, with the fields that already waited. False when
    nothing changes (the bytes already wait, or are the approved ones and nothing else
    waits): the caller then removes its staged copy."""
    with db.session.no_autoflush:
        pending = pending_request(record.id)
        fields = wanted_fields(pending) if pending is not None else {}
        waiting = wanted_content(pending) if pending is not None else None
        current = record.checksum_sha256 if waiting is None else waiting.checksum_sha256
        if content.checksum_sha256 == current:
            return False
        _refuse_superseding_others(pending, caller_id)
        back = content.checksum_sha256 == record.checksum_sha256
        old = current
        _supersede(
            record,
            caller_id,
            pending,
            fields,
            None if back else content,
            {CONTENT: [old, content.checksum_sha256]},
        )
        return not back


def before_delete(record: FileRecord, caller_id: int | None) -> None:
    """A deleted record's pending request is cancelled (its bytes go), and who edited it
    forgotten; also with the setting off, which leaves requests opened before."""
    pending = pending_request(record.id)
    if pending is not None:
        cancel(pending, caller_id, "record deleted")
    for editor in db.session.scalars(
        select(ReleaseEditor).where(ReleaseEditor.record_id == record.id)
    ):
        db.session.delete(editor)


def summary(request: ReleaseRequest | None) -> dict[str, Any] | None:
    """What a record answer tells of the record's pending request (`ReleaseRequestSummary`)."""
    if request is None:
        return None
    return {
        "id": str(request.id),
        "kind": request.kind,
        "state": request.state,
        "sperrfrist": None if request.sperrfrist is None else request.sperrfrist.isoformat(),
        "pending": pending_change(request),
    }


def pending_change(request: ReleaseRequest) -> dict[str, Any] | None:
    """What a held change sets on approval: `fields` (their new values) and `content` (the
    new bytes, or null); null for a request to release."""
    if request.kind not in HELD:
        return None
    content = wanted_content(request)
    return {
        "fields": {name: _plain(value) for name, value in wanted_fields(request).items()},
        "content": None
        if content is None
        else {
            "sha256": content.checksum_sha256,
            "size": content.size,
            "mime_type": content.mime_type,
            "original_name": content.original_name,
            "change_note": content.change_note,
        },
    }


def pending_summaries(record_ids: list[uuid.UUID]) -> list[dict[str, Any]]:
    """The pending requests of these records, in their order, as `summary` shows them."""
    found = {
        request.record_id: request
        for request in db.session.scalars(
            select(ReleaseRequest).where(
                ReleaseRequest.record_id.in_(record_ids), ReleaseRequest.state == PENDING
            )
        )
    }
    return [
        {"record_id": str(record_id), **summary(found[record_id])}  # type: ignore[dict-item]
        for record_id in record_ids
        if record_id in found
    ]
