"""Recognising the caller of a protected request from its bearer token."""

from __future__ import annotations

from flask import g, request

from app.access_log import USER_ID_ENVIRON
from app.auth.services import resolve_token
from app.exceptions import NotAuthenticated
from app.models import ApiToken, User


def current_token() -> ApiToken:
    """The token of this request, checked once and remembered for the request."""
    token = g.get("api_token")
    if token is None:
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        value = value.strip()
        if scheme.lower() != "bearer" or not value:
            raise NotAuthenticated()
        token = resolve_token(value)
        if token is None:
            raise NotAuthenticated()
        g.api_token = token
        request.environ[USER_ID_ENVIRON] = token.user_id
    return token


def current_user() -> User:
    return current_token().user


def user_rate_key() -> str:
    """Rate-limit key for per-user limits; authenticates first, so strangers get 401."""
    return f"user:{current_user().id}"
