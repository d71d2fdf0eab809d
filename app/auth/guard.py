"""Recognising the caller of a protected request from its bearer token."""

from __future__ import annotations

from flask import g, request

from app.access_log import USER_ID_ENVIRON
from app.auth.services import Caller, resolve_token
from app.exceptions import NotAuthenticated


def current_user() -> Caller:
    """The caller of this request, checked once and remembered for the request."""
    caller = g.get("caller")
    if caller is None:
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        value = value.strip()
        if scheme.lower() != "bearer" or not value:
            raise NotAuthenticated()
        caller = resolve_token(value)
        if caller is None:
            raise NotAuthenticated()
        g.caller = caller
        request.environ[USER_ID_ENVIRON] = caller.id
    return caller


def user_rate_key() -> str:
    """Rate-limit key for per-user limits; authenticates first, so strangers get 401."""
    return f"user:{current_user().id}"
