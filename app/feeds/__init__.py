"""Feeds of what the public can download (issue 13): Atom for releases, RSS 2.0 with the
iTunes namespace for audio and video (a podcast)."""

from __future__ import annotations

from flask import Blueprint

from app.database import read_without_transaction

bp = Blueprint("feeds", __name__, url_prefix="/api/public")
bp.before_request(read_without_transaction)

from app.feeds import routes  # noqa: E402,F401

__all__ = ["bp"]
