"""Tokens: issuing and revoking personal access tokens, and recognising them on requests."""

from flask import Blueprint

bp = Blueprint("auth", __name__)

from app.auth import routes  # noqa: E402,F401
