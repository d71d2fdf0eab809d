"""Release requests (issue 38) as their users meet them: who may submit, approve (four eyes),
decline, cancel, list and review; plain values in and out, domain errors, no HTTP. The
requests' states and moves are app/files/approval.py's, which every write of a record passes."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select, tuple_
from sqlalchemy.exc import IntegrityError

from app.auth.services import Caller
from app.database import lock_database_on_sqlite
from app.exceptions import DomainError, RecordNotFound
from app.extensions import db
from app.files import approval, deletions, versions, writes
from app.files.access import find_record
from app.files.approval import RequestConflict
from app.models import FileRecord, FileVersion, ReleaseRequest, RequestKind, RequestState, User
from app.storage import Storage


class RequestNotFound(RecordNotFound):
    def __init__(self) -> None:
        super().__init__("No such release request for this caller.")


class ApprovalRefused(DomainError):
    """Not an approver, or the four-eyes rule (403)."""

    status = 403


def _user(caller: Caller) -> User:
    """The caller's account as it is now (roles are read fresh, not from a token cache)."""
    user = db.session.get(User, caller.id, populate_existing=True)
    if user is None:
        raise ApprovalRefused("Your account no longer exists.")
    return user


def is_approver(user: User) -> bool:
    return bool(user.is_active and (user.is_admin or user.is_approver))


def four_eyes_objection(
    user_id: int, record: FileRecord, request: ReleaseRequest, edited_by: set[int]
) -> str | None:
    """Why `user_id` may not approve `request` of `record` (None: they may): the approver is
    not the owner, not the submitter, and not anyone who changed the content or the public
    fields since the last approval."""
    if user_id == record.user_id:
        return "You own this record: another approver must approve its release."
    if user_id == request.submitted_by:
        return "You submitted this request: another approver must approve it."
    if user_id in edited_by:
        return (
            "You changed this record's content or public fields since its last approval: "
            "another approver must approve it."
        )
    return None


def submit(caller: Caller, record_id: uuid.UUID, note: str | None) -> ReleaseRequest:
    """Open a request to release an unreleased record: its owner or an administrator."""
    if not approval.enabled():
        raise RequestConflict(
            "RELEASE_APPROVAL is off: a record is released by setting freigabe true."
        )
    record = find_record(caller, record_id, lock=True)
    if record.freigabe:
        raise RequestConflict("The record is already released.")
    pending = approval.pending_request(record.id)
    if pending is not None:
        raise RequestConflict(
            f"The record already has a pending release request ({pending.id}): cancel it first."
        )
    request = approval.open_request(record, caller.id, note)
    try:
        db.session.commit()
    except IntegrityError:  # a concurrent submit won (one pending request per record)
        db.session.rollback()
        raise RequestConflict("The record already has a pending release request.") from None
    return request


def _locked(request_id: uuid.UUID) -> tuple[ReleaseRequest, FileRecord | None]:
    """The request and its record, locked until the commit: the record first, as every write
    of a record locks it, so that an approval and a change wait for each other."""
    found = db.session.get(ReleaseRequest, request_id)
    if found is None:
        raise RequestNotFound()
    lock_database_on_sqlite(db.session)
    record = db.session.scalars(
        select(FileRecord)
        .where(FileRecord.id == found.record_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).first()
    request = db.session.scalars(
        select(ReleaseRequest)
        .where(ReleaseRequest.id == request_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).one()
    return request, record


def _pending(request: ReleaseRequest) -> None:
    if request.state != RequestState.PENDING:
        raise RequestConflict(f"The release request is {request.state}, not pending.")


def _decide(record: FileRecord | None, storage: Storage, move: Callable[[], None]) -> None:
    """A decision ends like every write of its record (`writes.finish`: the draft's bytes it
    drops, and what was made of them, owed and deleted after the commit); of a record gone,
    by a commit of its own."""
    if record is not None:
        writes.finish([record], storage, lambda _record: move())
        return
    move()
    owed = deletions.take_owed()
    db.session.commit()
    deletions.carry_out(storage, owed)


def _check_waiting_bytes(record: FileRecord, storage: Storage) -> None:
    """The draft's new bytes are still stored (StorageUnavailable, 503, if storage cannot
    tell): an approval never ends the approved bytes for missing ones."""
    draft = approval.draft_of(record.id)
    key = None if draft is None else draft.stored_path
    if key is not None and not storage.exists(key):
        raise RequestConflict(
            "The new content waiting for this approval is missing from storage; nothing was "
            "changed. Decline or cancel the request, and replace the content again."
        )


def approve(
    caller: Caller, request_id: uuid.UUID, override_reason: str | None, storage: Storage
) -> ReleaseRequest:
    """Release the record exactly as submitted, in one transaction: `freigabe` true,
    `freigegeben_von` the approver's name, and for a held change of a released record
    (`change`, `sperrfrist`) its new content and public fields swapped in. Refused (and the
    request cancelled) if the record is no longer what the request is bound to."""
    if not approval.enabled():
        raise RequestConflict(
            "RELEASE_APPROVAL is off: pending requests wait, unapproved, until it is on again "
            "(they may still be declined or cancelled)."
        )
    user = _user(caller)
    if not is_approver(user):
        raise ApprovalRefused(
            "Only approvers may approve release requests (an operator grants the role with "
            "`flask users grant-approver`)."
        )
    request, record = _locked(request_id)
    _pending(request)
    objection = None
    if record is not None:
        edited = approval.editors(record.id)
        objection = four_eyes_objection(user.id, record, request, edited)
    if objection is not None:
        if not user.is_admin:
            raise ApprovalRefused(objection)
        if not override_reason:
            raise ApprovalRefused(
                f"{objection} As an administrator you may override this only with a reason "
                "(override_reason)."
            )
    void = approval.void(request, record)
    if void is not None:
        _decide(record, storage, lambda: approval.cancel(request, user.id, void.reason))
        raise RequestConflict(void.message)
    assert record is not None
    _check_waiting_bytes(record, storage)
    reason = override_reason if objection is not None else None
    # A write like every other: the one pipeline (its public moments, its DOI, owed bytes).
    writes.finish([record], storage, lambda r: approval.approve(request, r, user, reason))
    return request


def decline(caller: Caller, request_id: uuid.UUID, reason: str, storage: Storage) -> ReleaseRequest:
    """Decline a request; a change's draft goes, the record stays as approved."""
    user = _user(caller)
    if not is_approver(user):
        raise ApprovalRefused("Only approvers may decline release requests.")
    request, record = _locked(request_id)
    _pending(request)
    _decide(record, storage, lambda: approval.decline(request, user.id, reason))
    return request


def cancel(
    caller: Caller, request_id: uuid.UUID, reason: str | None, storage: Storage
) -> ReleaseRequest:
    """Withdraw a pending request: its submitter, the record's owner or an administrator."""
    request, record = _locked(request_id)
    if not (
        caller.is_admin
        or caller.id == request.submitted_by
        or (record is not None and caller.id == record.user_id)
    ):
        raise RequestNotFound()
    _pending(request)
    _decide(record, storage, lambda: approval.cancel(request, caller.id, reason or "withdrawn"))
    return request


def _visible(caller: Caller, user: User) -> Any:
    """Approvers and administrators see every request; others theirs and their records'."""
    if is_approver(user):
        return None
    own_records = select(FileRecord.id).where(FileRecord.user_id == caller.id)
    return or_(ReleaseRequest.submitted_by == caller.id, ReleaseRequest.record_id.in_(own_records))


def list_requests(
    caller: Caller,
    state: str | None,
    record_id: uuid.UUID | None,
    after: tuple[datetime, uuid.UUID] | None,
    per_page: int,
) -> tuple[list[ReleaseRequest], tuple[datetime, uuid.UUID] | None]:
    """One page of the requests `caller` may see, newest first, continuing after the
    position `after` (keyset: submitted_at, id); and the position of the next page's start,
    if there is one."""
    query = select(ReleaseRequest).order_by(
        ReleaseRequest.submitted_at.desc(), ReleaseRequest.id.desc()
    )
    scope = _visible(caller, _user(caller))
    if scope is not None:
        query = query.where(scope)
    if state is not None:
        query = query.where(ReleaseRequest.state == state)
    if record_id is not None:
        query = query.where(ReleaseRequest.record_id == record_id)
    if after is not None:
        query = query.where(tuple_(ReleaseRequest.submitted_at, ReleaseRequest.id) < tuple_(*after))
    found = list(db.session.scalars(query.limit(per_page + 1)))
    if len(found) <= per_page:
        return found, None
    last = found[per_page - 1]
    return found[:per_page], (last.submitted_at, last.id)


def get_request(caller: Caller, request_id: uuid.UUID) -> ReleaseRequest:
    query = select(ReleaseRequest).where(ReleaseRequest.id == request_id)
    scope = _visible(caller, _user(caller))
    if scope is not None:
        query = query.where(scope)
    request = db.session.scalars(query).first()
    if request is None:
        raise RequestNotFound()
    return request


def describe(requests: list[ReleaseRequest]) -> list[dict[str, Any]]:
    """Plain values of requests for the answer: emails for user ids, the records as now, what
    a pending change sets, and the change notes a release makes public."""
    user_ids = {r.submitted_by for r in requests} | {r.decided_by for r in requests}
    emails = {
        user_id: email
        for user_id, email in db.session.execute(
            select(User.id, User.email).where(User.id.in_(user_ids - {None}))
        )
    }
    record_ids = {r.record_id for r in requests}
    records = {
        record.id: record
        for record in db.session.scalars(select(FileRecord).where(FileRecord.id.in_(record_ids)))
    }
    waiting = approval.waiting_for(list(records.values()))
    return [
        {
            "id": str(r.id),
            "record_id": str(r.record_id),
            "kind": r.kind,
            "sperrfrist": r.sperrfrist,
            "state": r.state,
            "note": r.note,
            "content_sha256": r.content_sha256,
            "public_hash": r.public_hash,
            "submitted_by": emails.get(r.submitted_by),
            "submitted_at": r.submitted_at,
            "decided_by": emails.get(r.decided_by),
            "decided_at": r.decided_at,
            "reason": r.reason,
            "override": r.override,
            "changes": json.loads(r.changes) if r.changes else None,
            "pending": approval.pending_change(
                r, records.get(r.record_id), waiting.get(r.record_id, (None, None))[1]
            ),
            "change_notes": _notes_made_public(r),
            "record": records.get(r.record_id),
        }
        for r in requests
    ]


def _notes_made_public(request: ReleaseRequest) -> list[dict[str, Any]] | None:
    """Of a pending release: the change notes of the record's kept versions, which its page
    shows once it is public (a note written since submission came with new content, which
    cancelled the request); None otherwise."""
    if request.kind != RequestKind.RELEASE or request.state != RequestState.PENDING:
        return None
    return [
        {"version": version.number, "change_note": version.change_note}
        for version in versions.kept_versions(request.record_id)
        if version.change_note
    ]


def content_to_review(caller: Caller, request_id: uuid.UUID) -> FileRecord | FileVersion:
    """The content a pending request is bound to, for an approver to download exactly that:
    a change's new bytes (its draft's), else the record's (others: 403, or 404 if they may
    not know the request)."""
    request = get_request(caller, request_id)
    if not is_approver(_user(caller)):
        raise ApprovalRefused("Only approvers review the content of release requests.")
    _pending(request)
    draft = approval.draft_of(request.record_id)
    if draft is not None and draft.stored_path is not None:
        return draft
    record = db.session.get(FileRecord, request.record_id)
    if record is None or record.checksum_sha256 != request.content_sha256:
        raise RequestConflict("The record's content changed since the request was submitted.")
    return record
