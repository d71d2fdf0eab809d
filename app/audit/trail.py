"""Writing the trail: every change of a record, an account or a token leaves one entry, written
by the transaction that makes the change, so that a commit carries both or neither.

Changes are seen where they are sent, not where they are made: a `before_flush` listener
reads what each flush changes of the audited models (`AUDITED`: records, accounts, tokens;
old and new values from the ORM's attribute history), whoever changed it (a view, tus
completion, `flask import`, an operator command). Just before the commit the entries are
numbered and appended to one of several hash chains, the one whose head this transaction
could lock without waiting (`FOR UPDATE SKIP LOCKED`): a chain's order needs its head locked
until the commit, and with one chain every writer would queue behind the others' commits
(measured: a quarter of the PATCH rate of 8 concurrent clients on PostgreSQL, bench/audit.py).
Statements that bypass the ORM's objects (bulk `UPDATE`/`DELETE`) are not seen; the service
changes audited tables through objects (revoking a token too), and what is no audited table's
(a share link) calls `note` itself.
"""

from __future__ import annotations

import hashlib
import json
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import click
from flask import g, has_request_context, request
from sqlalchemy import event, func, insert, inspect, select, update
from sqlalchemy.orm import Session

from app.access_log import REQUEST_ID_ENVIRON
from app.audit.schemas import ENTRY_FIELDS
from app.files import approval
from app.models import (
    ApiToken,
    AuditChainHead,
    AuditEntry,
    Cover,
    CoverOrigin,
    Doi,
    FileRecord,
    ReleaseRequest,
    RequestState,
    ShareLink,
    User,
    utcnow,
)
from app.schemas.field_types import format_timestamp
from app.schemas.records import MetadataSchema

GENESIS = "0" * 64
_PENDING = "audit_pending"
#: What an entry's hash covers (its fields, app/audit/schemas.py, but the database's number
#: across chains and the hash itself).
HASHED = tuple(name for name in ENTRY_FIELDS if name not in ("seq", "hash"))

#: What a record's content is, as `file.create`, `file.replace` and `file.delete` show it.
CONTENT = ("original_name", "size", "mime_type", "checksum_sha256", "version")
#: Business metadata, as the API names it (what create and PATCH accept), and the two
#: columns a record's `series` is kept in.
METADATA = (
    *(name for name, field in MetadataSchema().fields.items() if not field.load_only),
    "series_slug",
    "series_number",
)
ACCOUNT = ("email", "name", "is_admin", "is_active")
# Names in the trail: `sha256` reads better than the column's name.
_LABEL = {"checksum_sha256": "sha256"}


@dataclass
class Pending:
    """An entry waiting for the commit; `subject` is read then, when new rows have their ids."""

    action: str
    changes: dict[str, Any]
    actor_id: int | None
    actor: str | None
    request_id: str | None
    subject: Any = None
    record_id: uuid.UUID | None = None
    account_id: int | None = None
    # Of a new row, the columns to show, read at commit when the defaults are filled in.
    fields: tuple[str, ...] = ()


def plain(value: Any) -> Any:
    """A JSON value of a column value (dates as the API writes them)."""
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


#: A text value of an entry's `changes` whose JSON text is longer than this many bytes is
#: kept as its length and SHA-256 instead (`bounded`): a PATCH of every field at its longest
#: then leaves an entry of a few kilobytes, not tens (docs/security.md, issue 36 finding 6).
MAX_VALUE_BYTES = 256


def bounded(changes: Any) -> Any:
    """`changes` with every text whose JSON is longer than `MAX_VALUE_BYTES` replaced by
    `{"length": <characters>, "sha256": <hex of its UTF-8>}`: what it was can still be
    checked against a copy, and the entry's size is bounded. Applied when an entry is
    written; entries written before keep their text (and their hashes)."""
    if isinstance(changes, dict):
        return {key: bounded(value) for key, value in changes.items()}
    if isinstance(changes, list):
        return [bounded(value) for value in changes]
    if isinstance(changes, str) and len(canonical(changes).encode()) > MAX_VALUE_BYTES:
        digest = hashlib.sha256(changes.encode()).hexdigest()
        return {"length": len(changes), "sha256": digest}
    return changes


def canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def entry_hash(row: dict[str, Any]) -> str:
    """The hash of an entry (`row`: its `HASHED` fields, others are ignored): its place in its
    chain, its content (the `changes` as stored, a canonical JSON text) and its predecessor's
    hash, each as the API writes it. The number across chains (`seq`, the database's identity)
    is not in it; verify checks that it grows along each chain."""
    content = {name: plain(row[name]) for name in HASHED}
    return hashlib.sha256(canonical(content).encode()).hexdigest()


# --- who -------------------------------------------------------------------------------


def _actor() -> tuple[int | None, str | None]:
    """The account of the request (its email is read at commit) or the operator command."""
    if has_request_context():
        caller = g.get("caller")
        if caller is not None:
            return caller.id, caller.email or None
        return None, None
    context = click.get_current_context(silent=True)
    if context is not None:
        command = context.command_path.split(" ", 1)
        return None, f"cli:{command[-1]}"
    return None, "system"


def _request_id() -> str | None:
    return request.environ.get(REQUEST_ID_ENVIRON) if has_request_context() else None


def note(
    session: Session,
    action: str,
    changes: dict[str, Any],
    *,
    record_id: uuid.UUID | None = None,
    account_id: int | None = None,
    actor: tuple[int | None, str | None] | None = None,
) -> None:
    """An entry for a change the ORM does not see (a bulk statement), in this transaction."""
    actor_id, actor_name = actor if actor is not None else _actor()
    session.info.setdefault(_PENDING, []).append(
        Pending(
            action,
            changes,
            actor_id,
            actor_name,
            _request_id(),
            record_id=record_id,
            account_id=account_id,
        )
    )


# --- what ------------------------------------------------------------------------------


def link_values(link: ShareLink) -> dict[str, Any]:
    """What the trail keeps of a share link (not an audited model: its changes are noted by
    whoever makes them): never its secret or the secret's hash."""
    return {
        "link_id": str(link.id),
        "record_id": None if link.record_id is None else str(link.record_id),
        "path": link.path,
        "expires_at": format_timestamp(link.expires_at),
        "description": link.description,
    }


def _history(obj: Any, name: str) -> tuple[bool, Any, Any]:
    history = inspect(obj).attrs[name].history
    if not history.has_changes():
        return False, None, None
    old = history.deleted[0] if history.deleted else None
    new = history.added[0] if history.added else None
    return True, old, new


def _values(obj: Any, names: tuple[str, ...]) -> dict[str, Any]:
    return {_LABEL.get(name, name): plain(getattr(obj, name)) for name in names}


def _changed(obj: Any, names: tuple[str, ...]) -> dict[str, list[Any]]:
    """The columns of `names` whose value a flush changes: [old, new] under each."""
    changed = {}
    for name in names:
        was_changed, old, new = _history(obj, name)
        if was_changed and old != new:
            changed[name] = [plain(old), plain(new)]
    return changed


#: An entry of a changed or deleted row: its action and changes.
Change = tuple[str, dict[str, Any]]


def _record_changed(obj: FileRecord) -> Change | None:
    content = [n for n in CONTENT + ("stored_path",) if _history(obj, n)[0]]
    changed = _changed(obj, METADATA)
    if content:
        before, after = {}, {}
        for name in CONTENT:
            was_changed, old, new = _history(obj, name)
            label = _LABEL.get(name, name)
            before[label] = plain(old if was_changed else getattr(obj, name))
            after[label] = plain(new if was_changed else getattr(obj, name))
        return "file.replace", {"old": before, "new": after, **changed}
    return ("file.update", changed) if changed else None


def _account_changed(obj: User) -> Change | None:
    changed: dict[str, Any] = _changed(obj, ACCOUNT)
    if _history(obj, "password_hash")[0]:
        changed["password"] = "changed"  # never the password, nor its hash
    return ("account.update", changed) if changed else None


def _token_about(token: ApiToken, changes: dict[str, Any]) -> tuple[None, int]:
    changes.setdefault("token_id", token.id)
    return None, token.user_id


#: What `release.submit` shows of a release request (app/files/approval.py, app/releases);
#: of a change also what it sets (`pending`, from its draft: `_release_about`).
RELEASE_SUBMITTED = (
    "id",
    "kind",
    "sperrfrist",
    "note",
    "content_sha256",
    "public_hash",
    "submitted_by",
)
#: The entry of a request's decision, by the state it reached (an approval by an
#: administrator's override is `release.override`).
RELEASE_DECIDED = {
    RequestState.APPROVED: "release.approve",
    RequestState.DECLINED: "release.decline",
}


def _release_changed(obj: ReleaseRequest) -> Change | None:
    was_changed, _old, new = _history(obj, "state")
    if not was_changed or new == RequestState.PENDING:
        return None
    changes: dict[str, Any] = {"request_id": str(obj.id), "reason": obj.reason}
    if new == RequestState.CANCELLED:
        changes["changed"] = json.loads(obj.changes) if obj.changes else {}
        return "release.cancel", changes
    if new == RequestState.APPROVED:
        changes["content_sha256"] = obj.content_sha256
        changes["public_hash"] = obj.public_hash
        if obj.kind == "sperrfrist":
            changes["sperrfrist"] = plain(obj.sperrfrist)
        return ("release.override" if obj.override else "release.approve"), changes
    return RELEASE_DECIDED.get(new, f"release.{new}"), changes


def _release_about(request: ReleaseRequest, changes: dict[str, Any]) -> tuple[uuid.UUID, None]:
    """A change's `release.submit` entry names what the change sets (its draft, as the
    request's answer shows it: new public fields, new content)."""
    if "submitted_by" in changes and request.kind in approval.HELD:
        session = inspect(request).session
        with session.no_autoflush:
            record = session.get(FileRecord, request.record_id)
            draft = approval.draft_of(request.record_id)
            changes["pending"] = approval.pending_change(request, record, draft)
    return request.record_id, None


def _doi_changed(obj: Doi) -> Change | None:
    was_changed, _old, new = _history(obj, "wanted")
    if was_changed and new == "deleted":
        return "doi.release", {"doi": obj.doi}
    return None


@dataclass(frozen=True)
class Audited:
    """What the trail records of one model's rows."""

    #: A new row's action and the columns its entry shows (read at commit, defaults filled in).
    created: tuple[str, tuple[str, ...]]
    #: A changed row's entry, if the change is one to record.
    changed: Callable[[Any], Change | None] | None
    #: A deleted row's entry.
    deleted: Callable[[Any], Change] | None
    #: The record and the account an entry of the row is about (it may add to its changes).
    about: Callable[[Any, dict[str, Any]], tuple[uuid.UUID | None, int | None]]
    #: Who made a row nobody is known to have made (a token issued at sign-in: its owner).
    owner: Callable[[Any], int] | None = None
    #: Which rows are audited (all, if not given).
    only: Callable[[Any], bool] = lambda _obj: True


#: The audited models, the one list of them: a row of any other model leaves no entry.
AUDITED: dict[type, Audited] = {
    FileRecord: Audited(
        created=("file.create", CONTENT + METADATA),
        changed=_record_changed,
        deleted=lambda record: ("file.delete", _values(record, CONTENT + METADATA)),
        about=lambda record, _changes: (record.id, None),
    ),
    User: Audited(
        created=("account.create", ACCOUNT),
        changed=_account_changed,
        deleted=lambda user: ("account.delete", _values(user, ACCOUNT)),
        about=lambda user, _changes: (None, user.id),
    ),
    ApiToken: Audited(
        created=("token.create", ("name",)),
        changed=None,
        deleted=lambda token: ("token.revoke", {"token_id": token.id, "name": token.name}),
        about=_token_about,
        owner=lambda token: token.user_id,
    ),
    Doi: Audited(
        created=("doi.reserve", ("doi",)),
        changed=_doi_changed,
        deleted=None,
        about=lambda doi, _changes: (doi.record_id, None),
    ),
    # An owner's cover (app/covers); the pictures the service makes of the content are not.
    Cover: Audited(
        created=("cover.upload", ("source", "source_type")),
        changed=None,
        deleted=lambda cover: ("cover.remove", _values(cover, ("source", "source_type"))),
        about=lambda cover, _changes: (cover.record_id, None),
        only=lambda cover: cover.origin == CoverOrigin.OWNER,
    ),
    ReleaseRequest: Audited(
        created=("release.submit", RELEASE_SUBMITTED),
        changed=_release_changed,
        deleted=None,
        about=_release_about,
    ),
}


def _record_changes(session: Session) -> list[Pending]:
    found: list[Pending] = []
    actor_id, actor = _actor()
    request_id = _request_id()

    def add(action: str, changes: dict[str, Any], obj: Any, **kw: Any) -> None:
        found.append(Pending(action, changes, actor_id, actor, request_id, subject=obj, **kw))

    for obj in session.new:
        if (audited := AUDITED.get(type(obj))) is not None and audited.only(obj):
            action, shown = audited.created
            add(action, {}, obj, fields=shown)
    for obj in session.dirty:
        if (audited := AUDITED.get(type(obj))) is not None and audited.changed is not None:
            if (change := audited.changed(obj)) is not None:
                add(*change, obj)
    for obj in session.deleted:
        audited = AUDITED.get(type(obj))
        if audited is not None and audited.deleted is not None and audited.only(obj):
            add(*audited.deleted(obj), obj)
    return found


def _collect(session: Session, _context: Any, _instances: Any) -> None:
    found = _record_changes(session)
    if found:
        session.info.setdefault(_PENDING, []).extend(found)


# --- sealing at commit -----------------------------------------------------------------


def _subject_ids(item: Pending) -> tuple[uuid.UUID | None, int | None]:
    if item.subject is None:
        return item.record_id, item.account_id
    return AUDITED[type(item.subject)].about(item.subject, item.changes)


def _actor_name(session: Session, item: Pending, emails: dict[int, str]) -> tuple[int | None, str]:
    actor_id, actor = item.actor_id, item.actor
    subject = item.subject
    if actor_id is None and actor is None and subject is not None:
        owner = AUDITED[type(subject)].owner
        actor_id = owner(subject) if owner is not None else None
    if actor_id is None:
        return None, actor or "system"
    if actor is not None:
        return actor_id, actor
    if actor_id not in emails:
        with session.no_autoflush:
            user = session.get(User, actor_id)
        emails[actor_id] = user.email if user is not None else f"user:{actor_id}"
    return actor_id, emails[actor_id]


def _lock_a_chain(session: Session) -> Any:
    """The first chain whose head no other transaction holds, locked until this one ends (a
    lone writer always uses chain 0; concurrent ones spread over the next); if every chain is
    taken (more writers than chains), wait for any one."""
    free = (
        select(AuditChainHead.id, AuditChainHead.last_seq, AuditChainHead.last_hash)
        .order_by(AuditChainHead.id)
        .limit(1)
        .with_for_update(skip_locked=True)
    )
    head = session.execute(free).first()
    if head is None:
        some = random.randrange(session.scalar(select(func.count()).select_from(AuditChainHead)))
        head = session.execute(
            select(AuditChainHead.id, AuditChainHead.last_seq, AuditChainHead.last_hash)
            .where(AuditChainHead.id == some)
            .with_for_update()
        ).one()
    return head


def _seal(session: Session) -> None:
    """Number, chain and insert this transaction's entries; the last thing before commit."""
    if not session.info.get(_PENDING) and not _has_audited(session):
        return
    session.flush()  # sends the changes (and collects their entries) and assigns new ids
    pending: list[Pending] = session.info.pop(_PENDING, [])
    if not pending:
        return
    head = _lock_a_chain(session)
    chain_seq, prev = head.last_seq, head.last_hash
    at = utcnow()
    emails: dict[int, str] = {}
    rows = []
    for item in pending:
        chain_seq += 1
        if item.fields:
            item.changes = _values(item.subject, item.fields)
        record_id, account_id = _subject_ids(item)
        actor_id, actor = _actor_name(session, item, emails)
        row = {
            "chain": head.id,
            "chain_seq": chain_seq,
            "at": at,
            "actor_id": actor_id,
            "actor": actor,
            "action": item.action,
            "record_id": record_id,
            "account_id": account_id,
            "changes": canonical(bounded(item.changes)),
            "request_id": item.request_id,
            "prev_hash": prev,
        }
        row["hash"] = prev = entry_hash(row)
        rows.append(row)
    session.execute(insert(AuditEntry), rows)
    session.execute(
        update(AuditChainHead)
        .where(AuditChainHead.id == head.id)
        .values(last_seq=chain_seq, last_hash=prev)
    )


def _has_audited(session: Session) -> bool:
    changed = (*session.new, *session.dirty, *session.deleted)
    return any(type(obj) in AUDITED for obj in changed)


def _forget(session: Session, *_args: Any) -> None:
    session.info.pop(_PENDING, None)


def init_app() -> None:
    if event.contains(Session, "before_flush", _collect):
        return
    event.listen(Session, "before_flush", _collect)
    event.listen(Session, "before_commit", _seal)
    event.listen(Session, "after_rollback", _forget)
    event.listen(Session, "after_soft_rollback", _forget)
