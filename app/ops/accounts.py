"""`flask users remove`: an account removed, with what it owns handed on or refused.

Here and not in app/auth/cli.py beside the other account commands because it reaches beyond
accounts: the records it owns, its share links, the audit trail.
"""

from __future__ import annotations

from dataclasses import dataclass

import click
from flask.cli import with_appcontext
from sqlalchemy import delete, func, select, update

from app import audit
from app.auth.services import (
    LastAdministrator,
    UserNotFound,
    get_user,
    normalize_email,
    refuse_last_administrator,
)
from app.exceptions import DomainError
from app.extensions import db
from app.models import (
    ApiToken,
    FileRecord,
    ReleaseEditor,
    ReleaseRequest,
    ResumableUpload,
    ShareLink,
    User,
)


class OwnsFiles(DomainError):
    pass


@dataclass
class Removal:
    """What went with a removed account."""

    email: str
    user_id: int
    files_handed_over: int = 0
    links_handed_over: int = 0
    links_revoked: int = 0
    tokens_revoked: int = 0
    uploads_dropped: int = 0


def remove_account(email: str, hand_files_to: str | None = None) -> Removal:
    """Delete the account `email` in one transaction, with an entry in the audit trail for
    each thing that changes: `account.delete`; `token.revoke` for each of its tokens; with
    `hand_files_to`, `file.update` (`owner`) for each of its records and `link.update`
    (`created_by`) for each of its share links, which then belong to that account; without
    it, `link.revoke` for each live link (its links go with it), and refused while it owns
    records. Its unfinished resumable uploads go too (`storage reconcile --fix` removes their
    pieces). The last active administrator cannot be removed."""
    user = get_user(email)
    heir: User | None = None
    if hand_files_to is not None:
        heir = get_user(hand_files_to)
        if heir.id == user.id:
            raise OwnsFiles("--hand-files-to must name another account than the one removed.")
    refuse_last_administrator(user, "remove this one")
    removal = Removal(user.email, user.id)
    record_ids = db.session.scalars(
        select(FileRecord.id).where(FileRecord.user_id == user.id).order_by(FileRecord.id)
    ).all()
    if record_ids and heir is None:
        raise OwnsFiles(
            f"{user.email} owns {len(record_ids)} file record(s): hand them to another "
            "account with --hand-files-to EMAIL, or delete them first."
        )
    if heir is not None:
        owner = [user.email, heir.email]
        db.session.execute(
            update(FileRecord)
            .where(FileRecord.user_id == user.id)
            .values(user_id=heir.id)
            .execution_options(synchronize_session=False)
        )
        for record_id in record_ids:
            audit.note(db.session, "file.update", {"owner": owner}, record_id=record_id)
        removal.files_handed_over = len(record_ids)
        for link in db.session.scalars(select(ShareLink).where(ShareLink.created_by == user.id)):
            link.created_by = heir.id
            audit.note(
                db.session,
                "link.update",
                {**audit.link_values(link), "created_by": owner},
                record_id=link.record_id,
            )
            removal.links_handed_over += 1
    else:
        live = select(ShareLink).where(
            ShareLink.created_by == user.id, ShareLink.revoked_at.is_(None)
        )
        for link in db.session.scalars(live):
            audit.note(db.session, "link.revoke", audit.link_values(link), record_id=link.record_id)
            removal.links_revoked += 1
    # As objects, so that the trail's listener writes each one's `token.revoke`.
    for token in db.session.scalars(select(ApiToken).where(ApiToken.user_id == user.id)):
        db.session.delete(token)
        removal.tokens_revoked += 1
    removal.uploads_dropped = (
        db.session.scalar(
            select(func.count())
            .select_from(ResumableUpload)
            .where(ResumableUpload.user_id == user.id, ResumableUpload.completed_at.is_(None))
        )
        or 0
    )
    _forget_in_release_requests(user.id)
    db.session.flush()
    db.session.delete(user)
    db.session.commit()
    return removal


def _forget_in_release_requests(user_id: int) -> None:
    """Release requests keep no id of a removed account (SQLite reuses ids: a later account
    would pass for its submitter), and it no longer counts as an editor; who submitted and
    decided stays in the audit trail."""
    for column in (ReleaseRequest.submitted_by, ReleaseRequest.decided_by):
        db.session.execute(
            update(ReleaseRequest)
            .where(column == user_id)
            .values({column.key: None})
            .execution_options(synchronize_session=False)
        )
    db.session.execute(delete(ReleaseEditor).where(ReleaseEditor.user_id == user_id))


@click.command("remove")
@click.argument("email")
@click.option(
    "--hand-files-to",
    metavar="EMAIL",
    help="Give the account's file records and share links to this account.",
)
@with_appcontext
def remove_command(email: str, hand_files_to: str | None) -> None:
    """Remove the account EMAIL, its tokens and its share links.

    Refused while it owns file records, unless --hand-files-to names the account that takes
    them (and its share links, which keep working). Every change is in the audit trail.
    """
    try:
        removal = remove_account(email, hand_files_to)
    except (UserNotFound, OwnsFiles, LastAdministrator) as exc:
        raise click.ClickException(exc.message) from None
    parts = [f"{removal.tokens_revoked} token(s) revoked"]
    if hand_files_to is not None:
        heir = normalize_email(hand_files_to)
        parts.append(
            f"{removal.files_handed_over} file record(s) and {removal.links_handed_over} share "
            f"link(s) handed to {heir}"
        )
    else:
        parts.append(f"{removal.links_revoked} share link(s) revoked")
    if removal.uploads_dropped:
        parts.append(
            f"{removal.uploads_dropped} unfinished upload(s) dropped (`flask storage reconcile "
            "--fix` removes their pieces)"
        )
    click.echo(f"Removed {removal.email} (id {removal.user_id}); {'; '.join(parts)}.")
