"""The pages' blueprint, apart from the views so that every page module can add its routes
(routes.py: records; browse.py, holder.py, sitemap.py) without importing each other."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, has_request_context, request, url_for

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


#: Mount points whose frame links `frame_links` keeps; a server has one (SCRIPT_NAME).
_FRAME_LINKS_KEPT = 8


@bp.app_context_processor
def _frame() -> dict[str, Any]:
    # Outside a request (a record's page kept by a CLI write) there is no frame to link.
    return {"site": frame_links()} if has_request_context() else {}


def frame_links() -> dict[str, str]:
    """The addresses every page's frame links to (style sheet, folders, search). `url_for`
    took a seventh of a record page's rendering for these three, which change only with the
    app's mount point, so they are worked out once per mount point."""
    kept = current_app.extensions.setdefault("page_frame_links", {})
    links = kept.get(request.script_root)
    if links is None:
        links = frame_links_now()
        if len(kept) >= _FRAME_LINKS_KEPT:
            kept.clear()
        kept[request.script_root] = links
    return links


def frame_links_now() -> dict[str, str]:
    return {
        "stylesheet": url_for("pages.static", filename="pages.css"),
        "browse": url_for("pages.browse"),
        "search": url_for("pages.search"),
    }
