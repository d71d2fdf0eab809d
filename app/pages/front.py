"""The front page (`/`): the newest public releases, the search box, the top folders and the
feeds, in the reader's language.

The releases are the feeds' (app/feeds/services.py): what a member of the public can download
right now, newest release first, so a record under embargo shows here on the day it ends. The
folders are the top of `/browse/` (app/pages/browse.py), from the same released paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flask import Response, current_app, request
from flask_babel import gettext as _

from app.feeds import services
from app.files import access, answers
from app.http import external_url
from app.pages.blueprint import bp
from app.pages.browse import RecordItem, child_folders, folder_url, record_items
from app.pages.i18n import page_language, render_page

#: Releases and top folders the front page shows; `/browse/` and the feeds have the rest.
NEWEST = 10
TOP_FOLDERS = 30


@dataclass(slots=True)
class FrontPage:
    newest: list[RecordItem]
    folders: list[tuple[str, str]]
    feeds: list[tuple[str, str, str]] = field(default_factory=list)


@bp.get("/")
@answers.cached(page_language)
def front() -> Response:
    """The front page; its ETag is its content's, so a reader revalidates it for free."""
    today = access.today()
    found = services.entries(
        None, today, current_app.config["APP_TIMEZONE"], media_only=False, size=NEWEST
    )
    names, _more = child_folders("", None, TOP_FOLDERS)
    page = FrontPage(
        newest=record_items([entry.record for entry in found], today),
        folders=[(name, folder_url(name)) for name in names],
        feeds=[
            (external_url("/api/public/feed.atom"), "application/atom+xml", _("Neu hier")),
            (external_url("/api/public/podcast.rss"), "application/rss+xml", "Podcast"),
        ],
    )
    response = Response(render_page("pages/front.html", page=page))
    response.add_etag()
    return response.make_conditional(request)
