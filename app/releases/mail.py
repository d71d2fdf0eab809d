"""Mail about release requests, through an outbox: approvers hear of a new request, the
submitter of its decision, or of its cancellation by someone else (a change of the record).

A `before_flush` listener writes the mail into `mail_outbox` in the transaction that opens or
decides the request (whichever path does: an endpoint, a PATCH, tus, `flask import`), so a
mail is owed exactly when the change is committed. After that commit a thread of the process
sends what is due (`Postman`), and `flask mail send` does the same from the command line (cron
or by hand): the request itself never waits for, nor fails by, the SMTP server. A failed send
is retried after `MAIL_RETRY_SECONDS`, doubling each time, up to `MAIL_MAX_ATTEMPTS` tries.
Without `SMTP_HOST` mail waits in the outbox.
"""

from __future__ import annotations

import logging
import smtplib
import ssl
from dataclasses import dataclass
from datetime import timedelta
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from typing import Any

from flask import Flask, current_app, has_app_context
from sqlalchemy import event, inspect, or_, select, update
from sqlalchemy.orm import Session

from app.extensions import db
from app.models import FileRecord, MailOutbox, ReleaseRequest, User, utcnow
from app.outbox import OutboxThread

log = logging.getLogger(__name__)
_QUEUED = "mail_queued"
#: How long a sender holds a mail it took before another may try it (it crashed meanwhile).
CLAIM = timedelta(minutes=5)


def _title(session: Session, record_id: Any) -> str:
    """The record's titel (else its file name), or its id once it is gone."""
    record = next(
        (obj for obj in session.new if isinstance(obj, FileRecord) and obj.id == record_id), None
    ) or session.get(FileRecord, record_id)
    if record is None:
        return str(record_id)
    return record.titel or record.original_name


def _queue(session: Session, recipients: list[str], subject: str, body: str) -> None:
    for recipient in recipients:
        session.add(MailOutbox(recipient=recipient, subject=subject[:255], body=body))
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
    what = {"sperrfrist": "an earlier embargo", "change": "a change"}.get(request.kind, "release")
    lines = [
        f"{submitter.email if submitter else 'An operator command'} asks for {what} of "
        f"{title} (record {request.record_id}).",
    ]
    if request.kind == "sperrfrist":
        lines.append(f"New sperrfrist: {request.sperrfrist or 'none'}")
    if request.kind == "change":
        if request.pending_stored_path is not None:
            lines.append(f"New content: {request.pending_original_name}")
        if request.pending_fields and request.pending_fields != "{}":
            lines.append(f"New public fields: {request.pending_fields}")
    if request.note:
        lines += ["", "Note:", request.note]
    lines += ["", f"Review, approve or decline: {_link(request)}"]
    _queue(session, list(approvers), f"Release request: {title}", "\n".join(lines))


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
    if request.state in ("approved", "declined"):
        return True
    return request.state == "cancelled" and request.decided_by != request.submitted_by


def _after_commit(session: Session) -> None:
    if session.info.pop(_QUEUED, False) and has_app_context():
        postman = current_app.extensions.get("postman")
        if postman is not None:
            postman.poke()


def _forget(session: Session, *_args: Any) -> None:
    session.info.pop(_QUEUED, None)


# --- sending -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    sent: int
    failed: int
    #: Seconds until the next retry is due, if one is.
    next_due: float | None


def _send(config: Any, mail: MailOutbox) -> None:
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


def send_due(limit: int = 100) -> Sent:
    """Send the mail that is due, each claimed first so that two senders never send one
    twice; a failure is noted with the next try's time."""
    config = current_app.config
    if not config.get("SMTP_HOST"):
        return Sent(0, 0, None)
    now = utcnow()
    max_attempts = config["MAIL_MAX_ATTEMPTS"]
    waiting = MailOutbox.sent_at.is_(None) & (MailOutbox.attempts < max_attempts)
    due = db.session.scalars(
        select(MailOutbox.id)
        .where(waiting, MailOutbox.next_attempt_at <= now)
        .order_by(MailOutbox.next_attempt_at, MailOutbox.id)
        .limit(limit)
    ).all()
    db.session.rollback()
    sent = failed = 0
    for mail_id in due:
        claimed = db.session.execute(
            update(MailOutbox)
            .where(MailOutbox.id == mail_id, waiting, MailOutbox.next_attempt_at <= now)
            .values(next_attempt_at=now + CLAIM)
        )
        db.session.commit()
        if claimed.rowcount != 1:
            continue
        mail = db.session.get(MailOutbox, mail_id)
        assert mail is not None
        try:
            _send(config, mail)
        except (OSError, smtplib.SMTPException) as exc:
            mail.attempts += 1
            delay = config["MAIL_RETRY_SECONDS"] * 2 ** (mail.attempts - 1)
            mail.next_attempt_at = utcnow() + timedelta(seconds=delay)
            mail.last_error = str(exc)[:1000] or type(exc).__name__
            failed += 1
            log.warning(
                "mail %s to %s failed (try %s): %s", mail.id, mail.recipient, mail.attempts, exc
            )
        else:
            mail.attempts += 1
            mail.sent_at = utcnow()
            sent += 1
        db.session.commit()
    soonest = db.session.scalar(
        select(MailOutbox.next_attempt_at)
        .where(waiting)
        .order_by(MailOutbox.next_attempt_at)
        .limit(1)
    )
    db.session.rollback()
    next_due = None if soonest is None else max(0.0, (soonest - utcnow()).total_seconds())
    return Sent(sent, failed, next_due)


class Postman(OutboxThread):
    """The process's thread that sends due mail after a commit wrote some, and when a retry
    falls due."""

    def __init__(self, app: Flask) -> None:
        super().__init__(app, "mail-outbox", lambda: send_due().next_due, "MAIL_RETRY_SECONDS")


def init_app(app: Flask) -> None:
    if app.config["MAIL_BACKGROUND"]:
        app.extensions["postman"] = Postman(app)
    if event.contains(Session, "before_flush", _collect):
        return
    event.listen(Session, "before_flush", _collect)
    event.listen(Session, "after_commit", _after_commit)
    event.listen(Session, "after_rollback", _forget)
