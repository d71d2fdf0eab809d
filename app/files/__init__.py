"""Protected file records: upload, list, read, download, update, replace and delete."""

from flask import Blueprint, request

from app.auth.guard import current_user
from app.database import read_without_transaction

bp = Blueprint("files", __name__, url_prefix="/api/files")


@bp.before_app_request
def require_token() -> None:
    """Every path under /api/files needs a token, even one that matches no route, so an
    anonymous caller learns nothing (not even 404 or 405) before authenticating."""
    if request.path == bp.url_prefix or request.path.startswith(f"{bp.url_prefix}/"):
        read_without_transaction()
        current_user()


from app.files import routes  # noqa: E402,F401
