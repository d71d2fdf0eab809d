"""Operator commands of release approval: `flask users grant-approver|revoke-approver`,
`flask releases report` and `flask mail send`."""

from __future__ import annotations

import csv
import sys
from datetime import UTC, date, datetime

import click
from flask import current_app
from flask.cli import AppGroup, with_appcontext
from sqlalchemy import func, select
from sqlalchemy.orm import aliased

from app import audit
from app.auth.services import UserNotFound, get_user
from app.extensions import db
from app.models import FileRecord, MailOutbox, ReleaseRequest, User
from app.releases import mail
from app.schemas.field_types import format_timestamp
from app.stats.cli import spreadsheet_safe

releases_group = AppGroup("releases", help="Report on release requests (RELEASE_APPROVAL).")
mail_group = AppGroup("mail", help="Send the mail outbox.")

REPORT_COLUMNS = (
    "request_id",
    "record_id",
    "titel",
    "kind",
    "state",
    "submitted_by",
    "submitted_at",
    "decided_by",
    "decided_at",
    "override",
    "reason",
    "content_sha256",
)


def set_approver(email: str, approver: bool) -> tuple[User, bool]:
    """Grant or revoke the approver role; the change is an `account.update` entry."""
    user = get_user(email)
    if user.is_approver == approver:
        return user, False
    audit.note(
        db.session,
        "account.update",
        {"is_approver": [user.is_approver, approver]},
        account_id=user.id,
    )
    user.is_approver = approver
    db.session.commit()
    return user, True


def _set(email: str, approver: bool) -> None:
    try:
        user, changed = set_approver(email, approver)
    except UserNotFound as exc:
        raise click.ClickException(exc.message) from None
    state = "an approver" if approver else "no approver"
    if not changed:
        click.echo(f"{user.email} (id {user.id}) is already {state}.")
    else:
        click.echo(f"{user.email} (id {user.id}) is now {state}.")


@click.command("grant-approver")
@click.argument("email")
@with_appcontext
def grant_approver_command(email: str) -> None:
    """Let the account EMAIL approve release requests of others (RELEASE_APPROVAL).

    Administrators may approve anyway. Never the owner's, the submitter's or an editor's own
    request. Recorded in the audit trail (account.update, is_approver).
    """
    _set(email, True)


@click.command("revoke-approver")
@click.argument("email")
@with_appcontext
def revoke_approver_command(email: str) -> None:
    """Take the approver role from the account EMAIL."""
    _set(email, False)


def _month(ctx: click.Context, param: click.Parameter, value: str) -> date:
    try:
        year, month = value.split("-")
        return date(int(year), int(month), 1)
    except ValueError:
        raise click.BadParameter("a month such as 2026-11") from None


@releases_group.command("report")
@click.option("--month", required=True, callback=_month, help="The month, e.g. 2026-11 (UTC).")
@click.option("-o", "--output", type=click.File("w"), default="-", help="File (default stdout).")
def report_command(month: date, output) -> None:
    """CSV of the release requests submitted in one month: who submitted and who approved,
    declined or cancelled what, and the overrides with their reasons. A text cell that a
    spreadsheet would read as a formula gets a `'` before it, as in `flask stats export`."""
    start = datetime(month.year, month.month, 1, tzinfo=UTC)
    end = datetime(month.year + month.month // 12, month.month % 12 + 1, 1, tzinfo=UTC)
    submitter, decider = aliased(User), aliased(User)
    rows = db.session.execute(
        select(ReleaseRequest, FileRecord.titel, submitter.email, decider.email)
        .outerjoin(FileRecord, FileRecord.id == ReleaseRequest.record_id)
        .outerjoin(submitter, submitter.id == ReleaseRequest.submitted_by)
        .outerjoin(decider, decider.id == ReleaseRequest.decided_by)
        .where(ReleaseRequest.submitted_at >= start, ReleaseRequest.submitted_at < end)
        .order_by(ReleaseRequest.submitted_at, ReleaseRequest.id)
    )
    writer = csv.writer(output or sys.stdout, lineterminator="\n")
    writer.writerow(REPORT_COLUMNS)
    for request, titel, submitted_by, decided_by in rows:
        cells = (
            str(request.id),
            str(request.record_id),
            titel or "",
            request.kind,
            request.state,
            submitted_by or "",
            format_timestamp(request.submitted_at),
            decided_by or "",
            format_timestamp(request.decided_at) if request.decided_at else "",
            "yes" if request.override else "no",
            request.reason or "",
            request.content_sha256,
        )
        writer.writerow([spreadsheet_safe(cell) for cell in cells])


@mail_group.command("send")
def send_command() -> None:
    """Send the mail that is due now (new and retried); the server does this by itself after
    each commit that wrote mail, so this is for cron or after an SMTP outage."""
    if not current_app.config.get("SMTP_HOST"):
        waiting = db.session.scalar(
            select(func.count()).select_from(MailOutbox).where(MailOutbox.sent_at.is_(None))
        )
        click.echo(f"SMTP_HOST is not set: {waiting} mail(s) wait in the outbox.")
        return
    result = mail.send_due(limit=10_000)
    click.echo(f"Sent {result.done}, failed {result.failed} (retried later).")
