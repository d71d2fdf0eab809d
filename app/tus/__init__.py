"""Resumable uploads with the tus 1.0.0 protocol under /api/uploads (https://tus.io)."""

from flask import Blueprint

bp = Blueprint("tus", __name__, url_prefix="/api/uploads")

from app.tus import routes  # noqa: E402,F401
