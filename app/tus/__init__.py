"""Resumable uploads with the tus 1.0.0 protocol under /api/uploads (https://tus.io)."""

from flask import Blueprint
from flask.blueprints import BlueprintSetupState

bp = Blueprint("tus", __name__, url_prefix="/api/uploads")

from app.tus import routes  # noqa: E402


@bp.record_once
def _check_pieces_before_their_body(state: BlueprintSetupState) -> None:
    """The server asks before it receives a large body (app/server.py)."""
    state.app.extensions.setdefault("body_checks", []).append(routes.refuse_before_body)
