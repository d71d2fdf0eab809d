"""Mail about release requests, through an outbox: approvers hear of a new request, the
submitter of its decision, or of its cancellation by someone else (a change of the record).

A `before_flush` listener writes the mail into `mail_outbox` in the transaction that opens or
decides the request (whichever path does: an endpoint, a PATCH, tus, `flask import`), so a
mail is owed exactly when the change is committed. After that commit the process's outbox
thread sends what is due, and `flask mail send` does the same from the command line (app/outbox.py:
the request itself never waits for, nor fails by, the SMTP server). A failed send is retried
after `MAIL_RETRY_SECONDS`, doubling each time, up to `MAIL_MAX_ATTEMPTS` tries. Without
`SMTP_HOST` mail waits in the outbox.
"""

from __future__ import annotations

import json
import smtplib
import ssl
from datetime import datetime
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from typing import Any

from flask import Flask, current_app, has_app_context
from sqlalchemy import ColumnElement, event, inspect, or_, select
from sqlalchemy.orm import Session

from app.files import approval
from app.models import (
    DRAFT_NUMBER,
    FileRecord,
    FileVersion,
    MailOutbox,
    ReleaseRequest,
    RequestKind,
    RequestState,
    User,
    utcnow,
)
from app.outbox import Outbox, OutboxThread, Worked

_QUEUED = "mail_queued"


def _title(session: Session, record_id: Any) -> str:
    """The record's titel (else its file name), or its id once it is gone."""
    record = next(
        (obj for obj in session.new if isinstance(obj, FileRecord) and obj.id == record_id), None
    ) or session.get(FileRecord, record_id)
    if record is None:
        return str(record_id)
    return record.titel or record.original_name


def _queue(session: Session, recipients: list[str], subject: str, body: str) -> None:
    # A header is one line: a title's line breaks (and any other whitespace run) fold to a space.
    subject = " ".join(subject.split())[:255]
    for recipient in recipients:
        session.add(MailOutbox(recipient=recipient, subject=subject, body=body))
    if recipients:
        session.info[_QUEUED] = True


def _link(request: ReleaseRequest) -> str:
    base = current_app.config.get("PUBLIC_BASE_URL") or ""
    return f"{base}/api/release-requests/{request.id}"


def _submitted(session: Session, request: ReleaseRequest) -> None:
    record_owner = session.scalar(
        select(FileRecord.user_id).where(FileRecord.id == request.record_id)
    )
    if record_owner is None:
        record_owner = next(
            (
                o.user_id
                for o in session.new
                if isinstance(o, FileRecord) and o.id == request.record_id
            ),
            None,
        )
    approvers = session.scalars(
        select(User.email).where(
            User.is_active,
            or_(User.is_admin, User.is_approver),
            User.id.not_in([i for i in (request.submitted_by, record_owner) if i is not None]),
        )
    ).all()
    submitter = session.get(User, request.submitted_by) if request.submitted_by else None
    title = _title(session, request.record_id)
    what = {RequestKind.SPERRFRIST: "an earlier embargo", RequestKind.CHANGE: "a change"}
    lines = [
        f"{submitter.email if submitter else 'An operator command'} asks for "
        f"{what.get(request.kind, 'release')} of {title} (record {request.record_id}).",
    ]
    if request.kind == RequestKind.SPERRFRIST:
        lines.append(f"New sperrfrist: {request.sperrfrist or 'none'}")
    draft = _draft(session, request)
    if request.kind == RequestKind.CHANGE and draft is not None:
        record = session.get(FileRecord, request.record_id)
        change = approval.pending_change(request, record, draft) if record else None
        if change and change["content"]:
            lines.append(f"New content: {change['content']['original_name']}")
        if change and change["fields"]:
            fields = json.dumps(change["fields"], sort_keys=True, ensure_ascii=False)
            lines.append(f"New public fields: {fields}")
    if request.note:
        lines += ["", "Note:", request.note]
    lines += ["", f"Review, approve or decline: {_link(request)}"]
    _queue(session, list(approvers), f"Release request: {title}", "\n".join(lines))


def _draft(session: Session, request: ReleaseRequest) -> FileVersion | None:
    """The draft a change request points at, also one this flush is about to write."""
    found = next(
        (
            obj
            for obj in session.new
            if isinstance(obj, FileVersion)
            and obj.record_id == request.record_id
            and obj.number == DRAFT_NUMBER
        ),
        None,
    )
    return found or approval.draft_of(request.record_id)


def _decided(session: Session, request: ReleaseRequest) -> None:
    submitter = session.get(User, request.submitted_by) if request.submitted_by else None
    if submitter is None:
        return
    decider = session.get(User, request.decided_by) if request.decided_by else None
    title = _title(session, request.record_id)
    lines = [f"Your release request for {title} (record {request.record_id}) was {request.state}"]
    lines[0] += f" by {decider.name} <{decider.email}>." if decider else "."
    if request.reason:
        lines += ["", f"Reason: {request.reason}"]
    lines += ["", _link(request)]
    _queue(
        session, [submitter.email], f"Release request {request.state}: {title}", "\n".join(lines)
    )


def _collect(session: Session, _context: Any, _instances: Any) -> None:
    if not has_app_context():
        return
    with session.no_autoflush:
        for obj in list(session.new):
            if isinstance(obj, ReleaseRequest):
                _submitted(session, obj)
        for obj in list(session.dirty):
            if isinstance(obj, ReleaseRequest):
                history = inspect(obj).attrs.state.history
                if history.has_changes() and _told(obj):
                    _decided(session, obj)


def _told(request: ReleaseRequest) -> bool:
    """Whether the submitter hears of the request's end: a decision, or a cancellation by
    someone else (a change of the record, a withdrawal by its owner or an administrator)."""
    if request.state in (RequestState.APPROVED, RequestState.DECLINED):
        return True
    return request.state == RequestState.CANCELLED and request.decided_by != request.submitted_by


def _after_commit(session: Session) -> None:
    if session.info.pop(_QUEUED, False) and has_app_context():
        postman = current_app.extensions.get("postman")
        if postman is not None:
            postman.poke()


def _forget(session: Session, *_args: Any) -> None:
    session.info.pop(_QUEUED, None)


# --- sending -----------------------------------------------------------------------------


def _send(mail: MailOutbox, _claim: datetime) -> None:
    config = current_app.config
    message = EmailMessage()
    message["From"] = config["MAIL_FROM"]
    message["To"] = mail.recipient
    message["Subject"] = mail.subject
    message["Date"] = format_datetime(utcnow())
    message["Message-ID"] = make_msgid(domain=config["MAIL_FROM"].rpartition("@")[2] or None)
    message.set_content(mail.body)
    host, port, timeout = config["SMTP_HOST"], config["SMTP_PORT"], config["SMTP_TIMEOUT_SECONDS"]
    security = config["SMTP_SECURITY"]
    if security == "ssl":
        smtp: smtplib.SMTP = smtplib.SMTP_SSL(
            host, port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        smtp = smtplib.SMTP(host, port, timeout=timeout)
    with smtp:
        if security == "starttls":
            smtp.starttls(context=ssl.create_default_context())
        if config["SMTP_USERNAME"]:
            smtp.login(config["SMTP_USERNAME"], config["SMTP_PASSWORD"] or "")
        smtp.send_message(message)
    mail.attempts += 1
    mail.sent_at = utcnow()


def _waiting() -> ColumnElement[bool]:
    max_attempts = current_app.config["MAIL_MAX_ATTEMPTS"]
    return MailOutbox.sent_at.is_(None) & (MailOutbox.attempts < max_attempts)


OUTBOX = Outbox(
    name="mail",
    model=MailOutbox,
    key=MailOutbox.id,
    due=MailOutbox.next_attempt_at,
    send=_send,
    retry="MAIL_RETRY_SECONDS",
    waiting=_waiting,
    error_text=lambda exc: str(exc)[:1000] or type(exc).__name__,
)


def send_due(limit: int = 100) -> Worked:
    """Send the mail that is due (app/outbox.py); nothing without `SMTP_HOST`."""
    if not current_app.config.get("SMTP_HOST"):
        return Worked(0, 0, None)
    return OUTBOX.work(limit)


class Postman(OutboxThread):
    """The process's thread that sends due mail after a commit wrote some, and when a retry
    falls due."""

    def __init__(self, app: Flask) -> None:
        super().__init__(app, OUTBOX, send_due)


def init_app(app: Flask) -> None:
    if app.config["MAIL_BACKGROUND"]:
        app.extensions["postman"] = Postman(app)
    if event.contains(Session, "before_flush", _collect):
        return
    event.listen(Session, "before_flush", _collect)
    event.listen(Session, "after_commit", _after_commit)
    event.listen(Session, "after_rollback", _forget)
