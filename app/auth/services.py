"""Accounts and personal access tokens (Sanctum's `<id>|<secret>` form)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache

from flask import current_app
from sqlalchemy import delete, func, select
from sqlalchemy.orm import joinedload
from werkzeug.security import check_password_hash, generate_password_hash

from app.exceptions import DomainError, ValidationFailed
from app.extensions import db
from app.models import ApiToken, FileRecord, User, utcnow

CREDENTIALS_INCORRECT = "The provided credentials are incorrect."


class AccountExists(DomainError):
    pass


def normalize_email(email: str) -> str:
    return email.strip().lower()


def hash_password(password: str) -> str:
    return generate_password_hash(password, method=current_app.config["PASSWORD_HASH_METHOD"])


@cache
def _decoy_hash(method: str) -> str:
    """A hash to check against for unknown emails, so both failures cost the same time."""
    return generate_password_hash(secrets.token_urlsafe(16), method=method)


def find_user(email: str) -> User | None:
    return db.session.scalars(select(User).where(User.email == normalize_email(email))).first()


def authenticate(email: str, password: str) -> User:
    user = find_user(email)
    if user is None:
        check_password_hash(_decoy_hash(current_app.config["PASSWORD_HASH_METHOD"]), password)
        raise ValidationFailed({"email": [CREDENTIALS_INCORRECT]})
    if not check_password_hash(user.password_hash, password) or not user.is_active:
        raise ValidationFailed({"email": [CREDENTIALS_INCORRECT]})
    return user


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def issue_token(user: User, name: str) -> str:
    """Store a new token and return its plain text, which is shown only this once."""
    secret = secrets.token_urlsafe(32)  # 256 bits
    ttl = current_app.config.get("TOKEN_TTL_MINUTES")
    token = ApiToken(
        user=user,
        name=name,
        token_hash=_digest(secret),
        expires_at=utcnow() + timedelta(minutes=ttl) if ttl else None,
    )
    db.session.add(token)
    db.session.commit()
    return f"{token.id}|{secret}"


def resolve_token(plain: str) -> ApiToken | None:
    """The live token for a bearer value, or None; never says which part was wrong."""
    token_id, sep, secret = plain.partition("|")
    if not sep or not token_id.isdigit() or not secret or len(token_id) > 18:
        return None
    # One query for token and owner: this runs on every protected request.
    token = db.session.scalars(
        select(ApiToken).options(joinedload(ApiToken.user)).where(ApiToken.id == int(token_id))
    ).first()
    if token is None or not hmac.compare_digest(token.token_hash, _digest(secret)):
        return None
    now = utcnow()
    if token.expires_at is not None and token.expires_at <= now:
        return None
    if not token.user.is_active:
        return None
    _touch(token, now)
    return token


def _touch(token: ApiToken, now: datetime) -> None:
    """Record use at a coarse resolution so that reads do not write on every request."""
    resolution = timedelta(seconds=current_app.config["TOKEN_LAST_USED_RESOLUTION"])
    if token.last_used_at is None or now - token.last_used_at >= resolution:
        token.last_used_at = now
        db.session.commit()


def revoke_token(token: ApiToken) -> None:
    db.session.delete(token)
    db.session.commit()


def create_user(email: str, name: str, password: str, *, is_admin: bool = False) -> User:
    if find_user(email) is not None:
        raise AccountExists(f"A user with the email {normalize_email(email)} already exists.")
    user = User(
        email=normalize_email(email),
        name=name,
        password_hash=hash_password(password),
        is_admin=is_admin,
    )
    db.session.add(user)
    db.session.commit()
    return user


def provision_admin(email: str, name: str, password: str) -> tuple[User, bool]:
    """Create the administrator, or give an existing account admin rights and the password.

    An existing account keeps its id and name. Returns the user and whether it was created.
    """
    user = find_user(email)
    if user is None:
        return create_user(email, name, password, is_admin=True), True
    user.is_admin = True
    user.is_active = True
    user.password_hash = hash_password(password)
    db.session.commit()
    return user, False


# --- operator maintenance (the `flask users` and `flask tokens` commands) ------------------


class UserNotFound(DomainError):
    pass


@dataclass(frozen=True)
class UserSummary:
    """An account as operators list it, with how much it owns."""

    id: int
    email: str
    name: str
    is_admin: bool
    is_active: bool
    created_at: datetime
    files: int
    tokens: int


def get_user(email: str) -> User:
    user = find_user(email)
    if user is None:
        raise UserNotFound(f"No user with the email {normalize_email(email)}.")
    return user


def list_users() -> list[UserSummary]:
    """Every account in id order, with its number of file records and of stored tokens."""
    files = (
        select(FileRecord.user_id, func.count().label("n")).group_by(FileRecord.user_id).subquery()
    )
    tokens = select(ApiToken.user_id, func.count().label("n")).group_by(ApiToken.user_id).subquery()
    rows = db.session.execute(
        select(User, func.coalesce(files.c.n, 0), func.coalesce(tokens.c.n, 0))
        .outerjoin(files, files.c.user_id == User.id)
        .outerjoin(tokens, tokens.c.user_id == User.id)
        .order_by(User.id)
    ).all()
    return [
        UserSummary(
            id=user.id,
            email=user.email,
            name=user.name,
            is_admin=user.is_admin,
            is_active=user.is_active,
            created_at=user.created_at,
            files=int(file_count),
            tokens=int(token_count),
        )
        for user, file_count, token_count in rows
    ]


def set_password(email: str, password: str) -> User:
    """Give an account a new password; its existing tokens keep working."""
    user = get_user(email)
    user.password_hash = hash_password(password)
    db.session.commit()
    return user


def set_active(email: str, active: bool) -> tuple[User, bool]:
    """Activate or deactivate an account; returns the user and whether anything changed.

    A deactivated account cannot sign in and its tokens answer 401, but they are kept, so
    reactivating restores them.
    """
    user = get_user(email)
    if user.is_active == active:
        return user, False
    user.is_active = active
    db.session.commit()
    return user, True


def prune_expired_tokens(*, dry_run: bool = False) -> int:
    """Delete tokens whose lifetime has ended; returns how many there were."""
    expired = ApiToken.expires_at <= utcnow()
    if dry_run:
        return db.session.scalar(select(func.count()).select_from(ApiToken).where(expired)) or 0
    result = db.session.execute(
        delete(ApiToken).where(expired).execution_options(synchronize_session=False)
    )
    db.session.commit()
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
