"""The pages' blueprint, apart from the views so that every page module can add its routes
(routes.py: records; front.py, browse.py, holder.py, sitemap.py) without importing each other."""

from __future__ import annotations

from flask import Blueprint

from app.database import read_without_transaction

bp = Blueprint(
    "pages",
    __name__,
    template_folder="templates",
    static_folder="static",
    static_url_path="/static/pages",
)
bp.before_request(read_without_transaction)


@bp.record_once
def _tidy_templates(state) -> None:  # type: ignore[no-untyped-def]
    """Block tags leave no blank lines behind (the pages are the app's only templates)."""
    state.app.jinja_env.trim_blocks = True
    state.app.jinja_env.lstrip_blocks = True
