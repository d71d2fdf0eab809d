"""The release rule of `RELEASE_APPROVAL=on` and the state machine of its requests, written
once (issues 38 and 46). Every write of a record puts its changes in place through `create`,
`update`, `replace` or `delete` here (called by app/files/writes.py's one pipeline), and every
request moves through `open_request`, `supersede`, `cancel`, `approve` or `decline` here;
app/releases decides who may, and serves the requests.

What a reader holds (eight concepts):
1. The **record** row is what the public sees of a released record: its approved state.
2. The **draft** (`FileVersion` in state `draft`, at most one beside a record) is what a
   released record's editors want it to become: the public fields, and the content (its own
   bytes under a key of their own, or the record's, `stored_path` None). A change of a
   released record is written into the draft, never onto the record; a change back to the
   approved state drops it. A draft exists exactly while a change request of its record waits.
3. A **release request** asks for an approval: `RELEASE` of an unreleased record, `CHANGE`
   to put the draft in place (`SPERRFRIST` when all it changes is an earlier embargo). It is
   bound to the SHA-256 and the `public_hash` of what it would make public (the record, or
   the draft); at most one waits a record.
4. Its **states**: pending, then once approved, declined or cancelled. A write that voids what
   a request is bound to cancels it (with what changed); a further wish supersedes it
   (cancelled, and a new request bound to the draft as it is now).
5. The **base** of a change: the record's state its draft started from; an approval is refused
   if the record moved meanwhile (a write with the setting off).
6. **Editors** (`ReleaseEditor`): who changed the content or the public fields since the last
   approval, whatever the setting; they, the owner and the submitter may not approve.
7. **Owed deletions** (app/files/deletions.py): a dropped draft's bytes, deleted after the
   commit.
8. `freigegeben_von`: only an approval sets it while the setting is on.

The rule, with the setting on:
- a create or PATCH asking for `freigabe: true` of an unreleased record stores it unreleased
  and opens a `RELEASE` request; a change of its content or public fields cancels that request
  (with what changed), and one asking for release with it opens a new one; `freigabe: false`
  withdraws it;
- a released record's content and public fields change in its draft: a later `sperrfrist`
  applies at once (to the record and the draft), an earlier one waits; fields the public does
  not see change at once; `freigabe: false` unreleases at once and drops the draft.
With the setting off writes change the record at once, and pending requests wait, unapproved.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from types import SimpleNamespace
from typing import Any

from flask import current_app
from sqlalchemy import delete as sa_delete
from sqlalchemy import inspect, select

from app.exceptions import DomainError, ValidationFailed
from app.extensions import db
from app.files import deletions, versions
from app.files.versions import METADATA
from app.models import (
    DRAFT_NUMBER,
    FileRecord,
    FileVersion,
    ReleaseEditor,
    ReleaseRequest,
    RequestKind,
    RequestState,
    User,
    VersionState,
    utcnow,
)
from app.schemas.attribution import STRUCTURED, shown_values, stored_form, structures

#: What the public sees of a record besides its bytes (the public answer's fields but the
#: id, the timestamps and `freigabe`): a request binds their hash.
PUBLIC_FIELDS = ("original_name", "mime_type", *METADATA)
CONTENT = "checksum_sha256"
#: Not public, but set by the approval: while the setting is on only an approval changes it.
APPROVER_NAME = "freigegeben_von"
#: Kinds of request that put a draft in place.
HELD = (RequestKind.CHANGE, RequestKind.SPERRFRIST)


class ReleasedRecordChange(DomainError):
    """A change only an approval makes (`freigegeben_von`, 409)."""

    status = 409


class RequestConflict(DomainError):
    """The request or the record is not in a state that allows this (409)."""

    status = 409


class WaitingChangeConflict(DomainError):
    """A change would supersede one someone else waits with (409): a waiting change does not
    move the record's ETag, so If-Match alone cannot tell that one waits."""

    status = 409

    def __init__(self, request: ReleaseRequest) -> None:
        super().__init__(
            f"Release request {request.id} holds another user's change of this record, "
            "waiting for approval; it is not superseded silently. Wait for its decision, or "
            f"cancel it first (POST /api/release-requests/{request.id}/cancel: its submitter, the "
            "record's owner or an administrator), then send your change again."
        )


def enabled() -> bool:
    return current_app.config.get("RELEASE_APPROVAL") == "on"


def holds_changes(record: FileRecord) -> bool:
    """Whether a change of `record`'s content or public fields waits in its draft."""
    return enabled() and bool(record.freigabe)


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, date) else value


def public_hash(source: Any) -> str:
    """SHA-256 of the public fields' values of a record or a draft, as canonical JSON (the
    contract is in `ReleaseRequestSchema.public_hash`). The structured fields of issue 49
    enter it, as the answers show them, only when they hold a value: a request bound before
    they existed stays bound."""
    values = {
        name: _plain(getattr(source, name)) for name in PUBLIC_FIELDS if name not in STRUCTURED
    }
    values |= {name: value for name, value in structures(source).items() if value}
    text = json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _values(source: Any) -> dict[str, Any]:
    return {name: getattr(source, name) for name in (CONTENT, *PUBLIC_FIELDS)}


def _diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, list[Any]]:
    return {
        name: [_plain(before[name]), _plain(after[name])]
        for name in before
        if before[name] != after[name]
    }


# --- the draft ----------------------------------------------------------------------------


def draft_of(record_id: uuid.UUID) -> FileVersion | None:
    with db.session.no_autoflush:
        draft = db.session.get(FileVersion, (record_id, DRAFT_NUMBER))
    return draft if draft is not None and draft.state == VersionState.DRAFT else None


def _new_draft(record: FileRecord) -> FileVersion:
    """A draft starting from the record as it is (kept out of the session until it differs)."""
    return FileVersion(
        record_id=record.id,
        number=DRAFT_NUMBER,
        state=VersionState.DRAFT,
        **{**versions.content_of(record), "stored_path": None},
        **{name: getattr(record, name) for name in METADATA},
    )


def waiting(record: Any, draft: FileVersion) -> dict[str, Any]:
    """The public fields `draft` sets on approval: where it differs from the record."""
    return {
        name: getattr(draft, name)
        for name in METADATA
        if _plain(getattr(draft, name)) != _plain(getattr(record, name))
    }


def _keeps_record(record: Any, draft: FileVersion) -> bool:
    """Whether `draft` wants nothing but what the record holds."""
    return draft.stored_path is None and not waiting(record, draft)


def _drop_draft(draft: FileVersion) -> None:
    if draft.stored_path is not None:
        deletions.owe(draft.stored_path)
    if inspect(draft).persistent:
        db.session.delete(draft)


def _take_content(draft: FileVersion, source: Any, note: str | None) -> None:
    """The draft's content becomes `source`'s (a staged upload's own key, or the record's:
    then none of its own); bytes it held of its own are owed for deletion."""
    if draft.stored_path is not None:
        deletions.owe(draft.stored_path)
    for name, value in versions.content_of(source).items():
        setattr(draft, name, value)
    draft.change_note = note
    if isinstance(source, FileRecord):
        draft.stored_path = None


# --- requests: the state machine ----------------------------------------------------------


def pending_request(record_id: uuid.UUID) -> ReleaseRequest | None:
    with db.session.no_autoflush:
        return db.session.scalars(
            select(ReleaseRequest).where(
                ReleaseRequest.record_id == record_id,
                ReleaseRequest.state == RequestState.PENDING,
            )
        ).first()


def open_request(
    record: FileRecord,
    submitter_id: int | None,
    note: str | None = None,
    *,
    draft: FileVersion | None = None,
) -> ReleaseRequest:
    """A pending request to release `record` as it is, or to put its `draft` in place."""
    source = record if draft is None else draft
    # The id now, for the mail written before the flush; the rest are the model's defaults.
    request = ReleaseRequest(
        id=uuid.uuid4(),
        record_id=record.id,
        note=note,
        content_sha256=source.checksum_sha256,
        public_hash=public_hash(source),
        submitted_by=submitter_id,
    )
    if draft is not None:
        only_embargo = draft.stored_path is None and set(waiting(record, draft)) == {"sperrfrist"}
        request.kind = RequestKind.SPERRFRIST if only_embargo else RequestKind.CHANGE
        request.sperrfrist = draft.sperrfrist if only_embargo else None
        request.base_sha256 = record.checksum_sha256
        request.base_hash = public_hash(record)
    db.session.add(request)
    return request


def _end(request: ReleaseRequest, state: RequestState, by: int | None, reason: str | None) -> None:
    request.state = state
    request.decided_by = by
    request.decided_at = utcnow()
    request.reason = reason


def cancel(
    request: ReleaseRequest,
    by: int | None,
    reason: str,
    changes: dict[str, list[Any]] | None = None,
    *,
    keep_draft: bool = False,
) -> None:
    """Cancel a pending request; its draft goes with it unless a new request takes it over."""
    if request.kind in HELD and not keep_draft:
        draft = draft_of(request.record_id)
        if draft is not None:
            _drop_draft(draft)
    _end(request, RequestState.CANCELLED, by, reason)
    if changes:
        request.changes = json.dumps(changes)


def decline(request: ReleaseRequest, by: int, reason: str) -> None:
    """Decline a pending request; a change's draft is dropped, the record stays as approved."""
    cancel(request, by, reason)
    request.state = RequestState.DECLINED


def supersede(
    record: FileRecord,
    draft: FileVersion,
    pending: ReleaseRequest | None,
    caller_id: int | None,
    changes: dict[str, list[Any]],
    reason: str | None = None,
) -> None:
    """The draft changed: the waiting request (if any) is cancelled, and a new one bound to
    the draft as it is now waits, unless the draft wants nothing but the record (dropped)."""
    note_editor(record.id, caller_id)
    back = _keeps_record(record, draft)
    if pending is not None:
        reason = reason or ("changed" if back else "superseded by a new change")
        cancel(pending, caller_id, reason, changes, keep_draft=True)
    if back:
        _drop_draft(draft)
        return
    db.session.add(draft)
    open_request(record, caller_id, draft=draft)


@dataclass(frozen=True)
class Void:
    """Why a pending request can no longer be approved: the reason its cancellation keeps,
    and what the approver is told (409)."""

    reason: str
    message: str


def void(request: ReleaseRequest, record: FileRecord | None) -> Void | None:
    """Whether `record` is no longer what `request` is bound to (None: it may be approved):
    the record gone, changed since submission (also the record a change started from), or
    no longer released under a change."""
    if record is None:
        return Void("record deleted", "The record is gone; the request is cancelled.")
    source = draft_of(record.id) if request.kind in HELD else record
    moved = request.base_sha256 is not None and (
        record.checksum_sha256 != request.base_sha256 or public_hash(record) != request.base_hash
    )
    if (
        source is None
        or moved
        or source.checksum_sha256 != request.content_sha256
        or public_hash(source) != request.public_hash
    ):
        return Void(
            "changed since submission",
            "The record's content or public fields changed since the request was submitted; "
            "the request is cancelled and must be submitted again.",
        )
    if request.kind in HELD and not record.freigabe:
        return Void("unreleased", "The record is no longer released; the request is cancelled.")
    return None


def approve(
    request: ReleaseRequest, record: FileRecord, approver: User, override_reason: str | None
) -> None:
    """Release the record exactly as the request is bound to (checked by `void`): `freigabe`
    true, `freigegeben_von` the approver's name, and a change's draft put in place through the
    one replacement path (a new version, made by the submitter, if the bytes differ)."""
    if override_reason:
        request.override = True
    draft = draft_of(record.id)  # a change's (no other request has one)
    if draft is not None:
        if draft.stored_path is not None:
            content = versions.content_of(draft)
            versions.next_version(record, content, request.submitted_by, draft.change_note)
        for name in METADATA:
            setattr(record, name, getattr(draft, name))
        db.session.delete(draft)
    record.freigabe = True
    record.freigegeben_von = approver.name
    record.updated_at = utcnow()
    _end(request, RequestState.APPROVED, approver.id, override_reason)
    db.session.execute(sa_delete(ReleaseEditor).where(ReleaseEditor.record_id == record.id))


def note_editor(record_id: uuid.UUID, user_id: int | None) -> None:
    if user_id is not None and db.session.get(ReleaseEditor, (record_id, user_id)) is None:
        db.session.add(ReleaseEditor(record_id=record_id, user_id=user_id))


def editors(record_id: uuid.UUID) -> set[int]:
    """Who changed the record's content or public fields since its last approval."""
    return set(
        db.session.scalars(
            select(ReleaseEditor.user_id).where(ReleaseEditor.record_id == record_id)
        )
    )


# --- the rule at a record's writes --------------------------------------------------------


def earlier(new: date | None, old: date | None) -> bool:
    """Whether embargo `new` ends before embargo `old` (None: no embargo, the earliest)."""
    if old is None:
        return False
    return new is None or new < old


def _refuse_approver_name(record: FileRecord, name: str | None) -> None:
    """While the setting is on only an approval sets `freigegeben_von` (a value sent as it is
    stands: a client saving its whole form)."""
    if not enabled() or name == record.freigegeben_von:
        return
    if record.freigabe:
        raise ReleasedRecordChange(
            "The record is released and RELEASE_APPROVAL is on: only an approval sets "
            "freigegeben_von."
        )
    raise ReleasedRecordChange("RELEASE_APPROVAL is on: only an approval sets freigegeben_von.")


def create(record: FileRecord, caller_id: int) -> None:
    """A new record: asking for release (`freigabe` true, the default), it is stored
    unreleased and a request opened (its caller is the record's owner)."""
    if not enabled():
        return
    if record.freigegeben_von is not None:
        raise ValidationFailed(
            {APPROVER_NAME: ["RELEASE_APPROVAL is on: only an approval sets freigegeben_von."]}
        )
    if record.freigabe is not False:
        record.freigabe = False
        open_request(record, caller_id)


def update(record: FileRecord, changes: dict[str, Any], caller_id: int | None) -> bool:
    """Put a PATCH's `changes` where the rule says (see the module's docstring); whether the
    record's `updated_at` moves: not when the write only changed (or repeated) what waits in
    the draft."""
    if not enabled():
        _set(record, changes, caller_id)
        return True
    if APPROVER_NAME in changes:
        _refuse_approver_name(record, changes[APPROVER_NAME])
    if record.freigabe and changes.get("freigabe") is not False:
        return _hold_fields(record, changes, caller_id)
    released = record.freigabe
    pending = pending_request(record.id)
    changed = _set(record, changes, caller_id)
    if released:  # unreleased at once: what waited goes
        if pending is not None:
            cancel(pending, caller_id, "unreleased", changed)
        return True
    if pending is not None and (changed or changes.get("freigabe") is False):
        cancel(pending, caller_id, "changed" if changed else "withdrawn", changed)
        pending = None
    if record.freigabe:
        record.freigabe = False
        if pending is None:
            open_request(record, caller_id)
    return True


def _set(record: FileRecord, changes: Mapping[str, Any], caller_id: int | None) -> dict:
    """Set `changes` on the record; what changed of its content or public fields (whoever
    changed them is an editor, whatever the setting)."""
    before = _values(record)
    for name, value in changes.items():
        setattr(record, name, value)
    changed = _diff(before, _values(record))
    if changed:
        note_editor(record.id, caller_id)
    return changed


def _hold_fields(record: FileRecord, changes: dict[str, Any], caller_id: int | None) -> bool:
    """A PATCH of a released record: fields the public does not see change at once, its
    public fields in the draft (a later `sperrfrist` in both at once). A field sent as it
    was waits as before; one sent back to its approved value no longer waits."""
    pending = pending_request(record.id)
    draft = draft_of(record.id) or _new_draft(record)
    before = {name: getattr(record, name) for name in changes}
    was_waiting = waiting(record, draft)
    sent = {name: value for name, value in changes.items() if name in METADATA}
    for name, value in changes.items():
        if name not in METADATA:
            setattr(record, name, value)
    asked = {n: [_plain(getattr(record, n)), _plain(v)] for n, v in sent.items() if v != before[n]}
    back = {
        name: [_plain(getattr(draft, name)), _plain(value)]
        for name, value in sent.items()
        if value == before[name] and name in was_waiting
    }
    for name, value in sent.items():
        setattr(draft, name, value)
    applied = "sperrfrist" in asked and not earlier(draft.sperrfrist, record.sperrfrist)
    if applied:  # a later embargo holds nothing back: at once
        record.sperrfrist = draft.sperrfrist
    record_changed = any(getattr(record, name) != value for name, value in before.items())
    if not asked and not back:  # nothing waits that did not: a plain PATCH of the record
        return True
    now_waiting = waiting(record, draft)
    if pending is not None and not applied and now_waiting == was_waiting:
        return record_changed  # the same wish again (a client saving what it sent before)
    if pending is not None and now_waiting != was_waiting:
        _refuse_superseding_others(pending, caller_id)
    withdrawn = bool(back) and _keeps_record(record, draft) and not applied
    supersede(
        record,
        draft,
        pending,
        caller_id,
        {**back, **asked},
        reason="withdrawn by a change back" if withdrawn else None,
    )
    return record_changed


def _refuse_superseding_others(pending: ReleaseRequest | None, caller_id: int | None) -> None:
    """Only its submitter (or an operator command) supersedes a waiting change."""
    if (
        pending is not None
        and caller_id is not None
        and pending.submitted_by is not None
        and pending.submitted_by != caller_id
    ):
        raise WaitingChangeConflict(pending)


def replace(record: FileRecord, staged: Any, caller_id: int | None, note: str | None) -> bool:
    """A new content for the record (`staged`: a staged upload, app/files/uploads.py), in its
    draft while it is released, else at once through the one replacement path. Whether the
    staged bytes are in use (False: they are the ones already in place or waiting)."""
    if holds_changes(record):
        return _hold_content(record, staged, caller_id, note)
    if staged.checksum_sha256 == record.checksum_sha256:
        return False
    pending = pending_request(record.id)
    before = _values(record)
    versions.next_version(record, versions.content_of(staged), caller_id, note)
    changed = _diff(before, _values(record))
    note_editor(record.id, caller_id)
    if pending is not None and enabled():
        cancel(pending, caller_id, "changed", changed)
    return True


def _hold_content(record: FileRecord, staged: Any, caller_id: int | None, note: str | None) -> bool:
    """A replacement of a released record: the new bytes wait in the draft, beside the
    approved ones, with the fields that already waited."""
    pending = pending_request(record.id)
    draft = draft_of(record.id) or _new_draft(record)
    current = draft.checksum_sha256
    if staged.checksum_sha256 == current:
        return False
    _refuse_superseding_others(pending, caller_id)
    back = staged.checksum_sha256 == record.checksum_sha256
    _take_content(draft, record if back else staged, note)
    supersede(record, draft, pending, caller_id, {CONTENT: [current, staged.checksum_sha256]})
    return not back


def delete(record: FileRecord, caller_id: int | None) -> None:
    """A deleted record's pending request is cancelled (its draft goes) and who edited it
    forgotten; also with the setting off, which leaves requests opened before."""
    pending = pending_request(record.id)
    if pending is not None:
        cancel(pending, caller_id, "record deleted")
    db.session.execute(sa_delete(ReleaseEditor).where(ReleaseEditor.record_id == record.id))


# --- what record answers show -------------------------------------------------------------


def pending_change(request: ReleaseRequest, record: Any, draft: FileVersion | None) -> Any:
    """What a waiting change sets on approval: `fields` (their new values) and `content` (the
    draft's own bytes, or null); null for a request to release or one no longer pending."""
    if request.kind not in HELD or request.state != RequestState.PENDING or draft is None:
        return None
    return {
        "fields": shown_values(waiting(record, draft), draft, _plain),
        "content": None
        if draft.stored_path is None
        else {
            "sha256": draft.checksum_sha256,
            "size": draft.size,
            "mime_type": draft.mime_type,
            "original_name": draft.original_name,
            "change_note": draft.change_note,
        },
    }


def summary(
    request: ReleaseRequest | None, record: Any, draft: FileVersion | None = None
) -> dict[str, Any] | None:
    """What a record answer tells of the record's pending request (`ReleaseRequestSummary`);
    `draft` the record's, if it has one (looked up when not given)."""
    if request is None:
        return None
    if draft is None and request.kind in HELD:
        draft = draft_of(record.id)
    return {
        "id": str(request.id),
        "kind": request.kind,
        "state": request.state,
        "sperrfrist": None if request.sperrfrist is None else request.sperrfrist.isoformat(),
        "pending": pending_change(request, record, draft),
    }


def waiting_for(records: list[Any]) -> dict[uuid.UUID, tuple[ReleaseRequest, Any]]:
    """The pending requests of these records and their drafts, by record id, in two queries."""
    ids = [record.id for record in records]
    requests = db.session.scalars(
        select(ReleaseRequest).where(
            ReleaseRequest.record_id.in_(ids), ReleaseRequest.state == RequestState.PENDING
        )
    ).all()
    drafts = {
        draft.record_id: draft
        for draft in db.session.scalars(
            select(FileVersion).where(
                FileVersion.record_id.in_([r.record_id for r in requests]),
                FileVersion.state == VersionState.DRAFT,
            )
        )
    }
    return {r.record_id: (r, drafts.get(r.record_id)) for r in requests}


def as_editors_see(answers: list[dict[str, Any]]) -> None:
    """Record answers as their editors read them (setting on): what they asked for, with the
    request beside it. A waiting change's public fields are the draft's; `freigabe` is true
    while a release waits; `release_request` names the pending request (or null). The content
    columns stay the record's: they describe the bytes a download gives."""
    if not enabled():
        return
    records = [
        SimpleNamespace(**{**answer, **stored_form(answer), "id": uuid.UUID(answer["id"])})
        for answer in answers
    ]
    found = waiting_for(records)
    for answer, record in zip(answers, records, strict=True):
        request, draft = found.get(record.id, (None, None))
        answer["release_request"] = summary(request, record, draft)
        if request is None:
            continue
        if request.kind == RequestKind.RELEASE:
            answer["freigabe"] = True
        wanted = {} if draft is None else waiting(record, draft)
        for name, value in shown_values(wanted, draft, _plain).items():
            answer[name] = value
            if name == "org_themen":
                answer["iab_themen"] = value
