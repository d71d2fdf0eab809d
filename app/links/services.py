"""Share links: creating, listing, revoking and resolving them, and counting their use.

A link is one more kind of caller of app/files/access.py (`LinkHolder`): what it reaches is
decided there, at each use, from its creator's account as it is then. Only the SHA-256 of a
secret is stored; the plain secret exists in the creating answer only.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, bindparam, case, func, select, update

from app import audit
from app.auth.services import Caller
from app.exceptions import DomainError, RecordNotFound, ValidationFailed
from app.extensions import db
from app.files import access
from app.files.listing import Page
from app.models import ShareLink, User, utcnow
from app.schemas.field_types import format_timestamp

#: What `secrets.token_urlsafe(32)` makes: 256 random bits in 43 URL-safe characters.
SECRET_FORM = re.compile(r"[A-Za-z0-9_-]{43}")


class LinkNotFound(DomainError):
    """Unknown, revoked, or no longer backed by an active creator: all look the same."""

    status = 404

    def __init__(self) -> None:
        super().__init__("Not found.")


class LinkExpired(DomainError):
    """The link lived until `expired_at`; saying when helps the holder ask for a new one."""

    status = 410

    def __init__(self, expired_at: datetime) -> None:
        self.expired_at = expired_at
        super().__init__(f"This link expired at {format_timestamp(expired_at)}.")


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def state(link: Any, now: datetime) -> str:
    if link.revoked_at is not None:
        return "revoked"
    return "expired" if link.expires_at <= now else "active"


def check_expiry(expires_at: datetime, max_days: int, now: datetime) -> None:
    if expires_at <= now:
        raise ValidationFailed({"expires_at": ["The expires_at field must be in the future."]})
    if expires_at > now + timedelta(days=max_days):
        raise ValidationFailed(
            {"expires_at": [f"The expires_at field must be at most {max_days} days ahead."]}
        )


def create_link(
    caller: Caller,
    *,
    expires_at: datetime,
    max_days: int,
    description: str | None,
    record_id: uuid.UUID | None = None,
    path: str | None = None,
) -> tuple[ShareLink, str]:
    """A new link to a record `caller` may see (404 otherwise) or to a folder, with its entry
    in the audit trail in the same commit; returns the link and its plain secret."""
    if record_id is not None:
        access.find_record(caller, record_id)
    check_expiry(expires_at, max_days, utcnow())
    secret = secrets.token_urlsafe(32)  # 256 bits
    link = ShareLink(
        id=uuid.uuid4(),
        secret_hash=digest(secret),
        created_by=caller.id,
        record_id=record_id,
        path=path,
        description=description,
        expires_at=expires_at,
    )  # created_at and downloads (0): the model's defaults
    db.session.add(link)
    audit.note(db.session, "link.create", audit.link_values(link), record_id=record_id)
    db.session.commit()
    return link, secret


# --- reading and revoking, for the creator, the record's owner and administrators ---------


@dataclass(frozen=True)
class LinkFilters:
    record_id: uuid.UUID | None = None
    path: str | None = None


def _listed() -> Select[Any]:
    return (
        select(ShareLink, User.email)
        .join(User, User.id == ShareLink.created_by)
        .order_by(ShareLink.created_at.desc(), ShareLink.id.desc())
    )


def _page(query: Select[Any], page: int, per_page: int) -> Page:
    """One numbered page of (link, creator's email) rows of `query`, and the total."""
    total = db.session.scalar(select(func.count()).select_from(query.order_by(None).subquery()))
    items = list(db.session.execute(query.limit(per_page).offset((page - 1) * per_page)))
    return Page(items, total or 0, page, per_page, None)


def links_of_record(caller: Caller, record_id: uuid.UUID, page: int, per_page: int) -> Page:
    """The links to a record `caller` may see (its owner sees an administrator's too), a
    page of them."""
    access.find_record(caller, record_id)
    return _page(_listed().where(ShareLink.record_id == record_id), page, per_page)


def links_of(caller: Caller, filters: LinkFilters, page: int, per_page: int) -> Page:
    """The caller's links of both kinds (administrators: everyone's), filtered, a page."""
    query = _listed()
    if not caller.is_admin:
        query = query.where(ShareLink.created_by == caller.id)
    if filters.record_id is not None:
        query = query.where(ShareLink.record_id == filters.record_id)
    if filters.path is not None:
        query = query.where(ShareLink.path == filters.path)
    return _page(query, page, per_page)


def revoke(caller: Caller, link_id: uuid.UUID, *, record_id: uuid.UUID | None = None) -> None:
    """Revoke a link `caller` may manage (its creator, an administrator, or the owner of its
    record); anyone else, or a link of another record than `record_id`, gets 404. Revoking
    twice changes nothing more."""
    if record_id is not None:
        access.find_record(caller, record_id)
    link = db.session.get(ShareLink, link_id, with_for_update=True)
    if link is None or (record_id is not None and link.record_id != record_id):
        raise RecordNotFound()
    if not (caller.is_admin or link.created_by == caller.id):
        if link.record_id is None:
            raise RecordNotFound()
        access.find_record(caller, link.record_id)
    if link.revoked_at is None:
        link.revoked_at = utcnow()
        audit.note(db.session, "link.revoke", audit.link_values(link), record_id=link.record_id)
    db.session.commit()


# --- the holder ---------------------------------------------------------------------------

_LOOKUP = (
    select(
        ShareLink.id,
        ShareLink.secret_hash,
        ShareLink.record_id,
        ShareLink.path,
        ShareLink.expires_at,
        ShareLink.revoked_at,
        User.id.label("user_id"),
        User.is_admin,
        User.is_active,
        User.email,
    )
    .join(User, User.id == ShareLink.created_by)
    .where(ShareLink.secret_hash == bindparam("secret_hash"))
)


@dataclass(frozen=True)
class OpenLink:
    id: uuid.UUID
    expires_at: datetime
    holder: access.LinkHolder


def resolve(secret: str) -> OpenLink:
    """The live link of a secret, read from the database on every request (so a revocation
    or an expiry holds on every replica at once): 404 if unknown, revoked or its creator is
    deactivated, 410 once expired."""
    if not SECRET_FORM.fullmatch(secret):
        raise LinkNotFound()
    hashed = digest(secret)
    row = db.session.execute(_LOOKUP, {"secret_hash": hashed}).first()
    # The lookup is by hash, so its timing says nothing of the secret; the comparison of the
    # stored hash is constant-time all the same.
    if row is None or not hmac.compare_digest(row.secret_hash, hashed):
        raise LinkNotFound()
    if row.revoked_at is not None or not row.is_active:
        raise LinkNotFound()
    if row.expires_at <= utcnow():
        raise LinkExpired(row.expires_at)
    creator = Caller(token_id=0, id=row.user_id, is_admin=row.is_admin, email=row.email)
    return OpenLink(row.id, row.expires_at, access.LinkHolder(creator, row.record_id, row.path))


def note_use(link_id: uuid.UUID, *, download: bool) -> None:
    """Remember a use (and count a download): one UPDATE and commit per request, before any
    byte streams. Links are few and their holders fewer, so this costs far less than a
    queue would; a flood is bounded by the download itself."""
    now = utcnow()
    db.session.execute(
        update(ShareLink)
        .where(ShareLink.id == link_id)
        .values(
            downloads=ShareLink.downloads + (1 if download else 0),
            first_used_at=func.coalesce(ShareLink.first_used_at, now),
            last_used_at=case((ShareLink.last_used_at > now, ShareLink.last_used_at), else_=now),
        )
    )
    db.session.commit()
