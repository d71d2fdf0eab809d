"""Read-only access to released records, without a token."""

from flask import Blueprint

from app.database import read_without_transaction

bp = Blueprint("public", __name__, url_prefix="/api/public/files")
bp.before_request(read_without_transaction)

from app.public import routes  # noqa: E402,F401
