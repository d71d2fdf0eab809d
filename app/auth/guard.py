"""Recognising the caller of a protected request from its bearer token."""

from __future__ import annotations

from collections.abc import Callable

from flask import g, request

from app.access_log import USER_ID_ENVIRON
from app.auth.services import Caller, resolve_token
from app.exceptions import NotAuthenticated


def current_user() -> Caller:
    """The caller of this request, checked once and remembered for the request."""
    caller = g.get("caller")
    if caller is None:
        caller = caller_of(request.headers.get("Authorization", ""))
        if caller is None:
            raise NotAuthenticated()
        g.caller = caller
        request.environ[USER_ID_ENVIRON] = caller.id
    return caller


def current_user_again() -> Callable[[], Caller]:
    """The caller of this request as it will be when asked later, from a body that streams on
    after the request (app/files/downloads.py): raises NotAuthenticated once the token is
    revoked or expired, or its account deactivated."""
    authorization = request.headers.get("Authorization", "")

    def again() -> Caller:
        caller = caller_of(authorization)
        if caller is None:
            raise NotAuthenticated()
        return caller

    return again


def caller_of(authorization: str) -> Caller | None:
    """The caller of an `Authorization: Bearer <token>` value, or None."""
    scheme, _, value = authorization.partition(" ")
    value = value.strip()
    if scheme.lower() != "bearer" or not value:
        return None
    return resolve_token(value)


def user_rate_key() -> str:
    """Rate-limit key for per-user limits; authenticates first, so strangers get 401."""
    return f"user:{current_user().id}"
