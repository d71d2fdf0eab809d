"""Read-only access to released records, without a token."""

from flask import Blueprint

bp = Blueprint("public", __name__, url_prefix="/api/public/files")

from app.public import routes  # noqa: E402,F401
