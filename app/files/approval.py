"""The release rule of `RELEASE_APPROVAL=on` (issue 38), where records change.

Every write of a record (create, PATCH, content replacement, tus completion, `flask import`,
delete) calls `before_commit` once its changes are set on the ORM object and before it commits,
so the rule and the change share one transaction. With the setting off it does nothing.

With it on, nothing makes `freigabe` true but an approval (app/releases):
- a create or PATCH asking for `freigabe: true` stores the record unreleased and opens a
  release request bound to its content (SHA-256) and the hash of its public fields;
- a change of the content or the public fields of an unreleased record cancels its pending
  request (with what changed), and its author may no longer approve it (`ReleaseEditor`);
- a released record keeps what the public sees: a change of its content or of a public field
  is refused (409) until versions let a replacement wait beside the approved one, except the
  `sperrfrist`: moved later it changes at once, moved earlier it waits in a request of kind
  `sperrfrist` and applies on approval; `freigabe: false` always unreleases at once.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import date
from typing import Any

from flask import current_app
from sqlalchemy import inspect, select

from app.exceptions import DomainError
from app.extensions import db
from app.models import FileRecord, ReleaseEditor, ReleaseRequest, utcnow

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


class ReleasedRecordChange(DomainError):
    """A change of what the public sees of a released record, which needs an approval that
    cannot wait beside the released state yet (409)."""

    status = 409


def enabled() -> bool:
    return current_app.config.get("RELEASE_APPROVAL") == "on"


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, date) else value


def public_hash(record: FileRecord) -> str:
    """SHA-256 of the public fields' values, as canonical JSON."""
    values = {name: _plain(getattr(record, name)) for name in PUBLIC_FIELDS}
    text = json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


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
) -> ReleaseRequest:
    """A pending request bound to what `record` holds now (its changes set, not yet sent)."""
    request = ReleaseRequest(
        id=uuid.uuid4(),
        record_id=record.id,
        kind=kind,
        sperrfrist=sperrfrist,
        state=PENDING,
        note=note,
        content_sha256=record.checksum_sha256,
        public_hash=public_hash(record),
        submitted_by=submitter_id,
        submitted_at=utcnow(),
        override=False,
    )
    db.session.add(request)
    return request


def cancel(
    request: ReleaseRequest,
    by: int | None,
    reason: str,
    changes: dict[str, list[Any]] | None = None,
) -> None:
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


def before_commit(record: FileRecord, caller_id: int | None, *, new: bool = False) -> None:
    """Apply the release rule to `record`'s pending changes (see the module's docstring);
    `caller_id` is who makes them (None: an operator command)."""
    if not enabled():
        return
    # No query may flush the changes before their history is read.
    with db.session.no_autoflush:
        _apply_rule(record, caller_id, new)


def _apply_rule(record: FileRecord, caller_id: int | None, new: bool) -> None:
    if new:
        if record.freigabe is not False:
            record.freigabe = False
            open_request(record, caller_id if caller_id is not None else record.user_id)
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
        refused = [n for n in (*changes, *_changed(record, (APPROVER_NAME,))) if n != "sperrfrist"]
        if refused:
            raise ReleasedRecordChange(
                f"The record is released and RELEASE_APPROVAL is on, so what the public sees "
                f"({', '.join('content' if n == CONTENT else n for n in refused)}) cannot change "
                "without an approval. Unrelease it first (PATCH freigabe false), change it, and "
                "submit it for release again."
            )
        if "sperrfrist" in changes:
            old = _was(record, "sperrfrist")
            wanted = record.sperrfrist
            if earlier(wanted, old):
                record.sperrfrist = old  # the public keeps the approved embargo until approval
                if pending is not None:
                    cancel(pending, caller_id, "superseded by a new request")
                open_request(record, caller_id, kind="sperrfrist", sperrfrist=wanted)
                return
            note_editor(record.id, caller_id)
            if pending is not None:
                cancel(pending, caller_id, "changed", changes)
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


def refuse_replacing_released(record: FileRecord) -> None:
    """A content replacement of a released record is refused before its body is read."""
    if enabled() and record.freigabe:
        raise ReleasedRecordChange(
            "The record is released and RELEASE_APPROVAL is on, so its content cannot be "
            "replaced without an approval. Unrelease it first (PATCH freigabe false), replace "
            "the content, and submit it for release again."
        )


def before_delete(record: FileRecord, caller_id: int | None) -> None:
    """A deleted record's pending request is cancelled, and who edited it forgotten."""
    if not enabled():
        return
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
