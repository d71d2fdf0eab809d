"""Accounts and personal access tokens (Sanctum's `<id>|<secret>` form)."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache

from flask import current_app
from sqlalchemy import bindparam, delete, func, select, update
from werkzeug.security import check_password_hash, generate_password_hash

from app.cache import TOKENS, cache_for
from app.exceptions import DomainError, ValidationFailed
from app.extensions import db
from app.models import ApiToken, FileRecord, User, utcnow

CREDENTIALS_INCORRECT = "The provided credentials are incorrect."


@dataclass
class CachedToken:
    """What a token check read, as the cache keeps it (see app/cache.py)."""

    token_hash: str
    expires_at: datetime | None
    last_used_at: datetime | None
    caller: Caller


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


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a protected request: what the views need of a token and its owner."""

    token_id: int
    id: int  # the owner's user id
    is_admin: bool
    email: str = ""  # the owner's, as the audit trail names the actor


# One statement, prepared once, with only the columns a check needs: it runs on every
# protected request, and building and loading two ORM objects cost more than the round trip.
_TOKEN_CHECK = (
    select(
        ApiToken.token_hash,
        ApiToken.expires_at,
        ApiToken.last_used_at,
        ApiToken.user_id,
        User.email,
        User.is_admin,
        User.is_active,
    )
    .join(User, User.id == ApiToken.user_id)
    .where(ApiToken.id == bindparam("token_id"))
)


# ASCII digits only: str.isdigit() also takes "²", which int() refuses. Ids are 32-bit
# integers (api_tokens.id); a larger one names no token and must not reach the query.
_TOKEN_ID = re.compile(r"[0-9]{1,10}")
_MAX_TOKEN_ID = 2**31 - 1


def resolve_token(plain: str) -> Caller | None:
    """The caller of a live token for a bearer value, or None; never says which part was wrong."""
    token_id_text, sep, secret = plain.partition("|")
    if not sep or not secret or not _TOKEN_ID.fullmatch(token_id_text):
        return None
    if int(token_id_text) > _MAX_TOKEN_ID:
        return None
    token_id, digest, now = int(token_id_text), _digest(secret), utcnow()
    cache = cache_for(TOKENS)
    entry: CachedToken | None
    entry, generation = cache.get(TOKENS, token_id) if cache is not None else (None, None)
    cached = entry is not None
    if entry is None:
        row = db.session.connection().execute(_TOKEN_CHECK, {"token_id": token_id}).first()
        if row is None or not row.is_active:
            return None
        entry = CachedToken(
            token_hash=row.token_hash,
            expires_at=row.expires_at,
            last_used_at=row.last_used_at,
            caller=Caller(
                token_id=token_id, id=row.user_id, is_admin=row.is_admin, email=row.email
            ),
        )
    if not hmac.compare_digest(entry.token_hash, digest):
        return None
    if entry.expires_at is not None and entry.expires_at <= now:
        return None
    if cache is not None and not cached:
        cache.put(TOKENS, generation, token_id, entry)  # only tokens that were presented rightly
    _touch(entry, now)
    return entry.caller


def _touch(entry: CachedToken, now: datetime) -> None:
    """Record use at a coarse resolution so that reads do not write on every request."""
    resolution = timedelta(seconds=current_app.config["TOKEN_LAST_USED_RESOLUTION"])
    if entry.last_used_at is None or now - entry.last_used_at >= resolution:
        entry.last_used_at = now
        db.session.execute(
            update(ApiToken).where(ApiToken.id == entry.caller.token_id).values(last_used_at=now)
        )
        db.session.commit()


def revoke_token(token_id: int) -> None:
    """Delete the token, as an object: the audit trail's listener writes its entry."""
    token = db.session.get(ApiToken, token_id)
    if token is not None:
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


class LastAdministrator(DomainError):
    pass


def other_active_administrators(user: User) -> int:
    """How many active administrators there are besides `user`."""
    return (
        db.session.scalar(
            select(func.count())
            .select_from(User)
            .where(User.is_admin, User.is_active, User.id != user.id)
        )
        or 0
    )


def refuse_last_administrator(user: User, doing: str) -> None:
    """Refuse to take the last active administrator away: nobody could then manage others'
    records, and only an operator command gives the role again."""
    if user.is_admin and user.is_active and not other_active_administrators(user):
        raise LastAdministrator(
            f"{user.email} is the only active administrator: give another account the role "
            f"first (flask users set-role EMAIL admin), then {doing}."
        )


def set_role(email: str, admin: bool) -> tuple[User, bool]:
    """Give or take administrator rights; returns the user and whether anything changed. The
    audit trail records the change (`account.update`, `is_admin`), and a process's cached
    token checks end with it (app/cache.py)."""
    user = get_user(email)
    if user.is_admin == admin:
        return user, False
    if not admin:
        refuse_last_administrator(user, "take this one's away")
    user.is_admin = admin
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
