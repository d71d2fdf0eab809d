"""The pages' blueprint, apart from the views so that every page module can add its routes
(routes.py: records; browse.py, holder.py, sitemap.py) without importing each other."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, has_request_context, url_for

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


#: The links of every page's frame: (endpoint, values) by name.
FRAME_LINKS = {
    "stylesheet": ("pages.static", {"filename": "pages.css"}),
    "browse": ("pages.browse", {}),
    "search": ("pages.search", {}),
}


@bp.app_context_processor
def _frame() -> dict[str, Any]:
    """`frame`: the addresses every page's frame links to. A page kept when its record is
    written (app/pages/kept.py, outside any request) is given `kept_frame` instead."""
    if not has_request_context():
        return {}
    return {
        "frame": {
            name: url_for(endpoint, **values) for name, (endpoint, values) in FRAME_LINKS.items()
        }
    }


def kept_frame(script_root: str) -> dict[str, str]:
    """The frame's links under `script_root` (a placeholder), as `url_for` writes them under a
    request's mount point."""
    adapter = current_app.url_map.bind("kept.invalid", script_name="/")
    return {
        name: script_root + adapter.build(endpoint, values)
        for name, (endpoint, values) in FRAME_LINKS.items()
    }
