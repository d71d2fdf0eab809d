"""Protected file records: upload, list, read, download, update, replace and delete."""

from flask import Blueprint

bp = Blueprint("files", __name__, url_prefix="/api/files")

from app.files import routes  # noqa: E402,F401
