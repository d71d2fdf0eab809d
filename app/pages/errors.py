"""Errors of page paths answer an HTML page, not the API's JSON (app/errors.py asks
`page_of_error`, which the factory hands it)."""

from __future__ import annotations

import re

from flask import Response, current_app, request
from flask.globals import request_ctx
from flask_babel import lazy_gettext as _

from app.links.holder import PAGE_PREFIX
from app.pages.i18n import render_page

#: First path segments served by this package; an error under them is an HTML page.
PAGE_ROOTS = frozenset(
    {"records", "browse", "search", "series", PAGE_PREFIX.strip("/"), "robots.txt"}
)
#: The sitemap and its parts (`/sitemap.xml`, `/sitemap-2.xml`).
SITEMAPS = re.compile(r"sitemap(-[^/]*)?\.xml")

#: What a reader is told (German source strings; app/translations has the English).
TITLES = {
    403: _("Nicht freigegeben"),
    404: _("Nicht gefunden"),
    400: _("Ungültige Anfrage"),
    405: _("Methode nicht erlaubt"),
    429: _("Zu viele Anfragen"),
    500: _("Serverfehler"),
    503: _("Dienst nicht erreichbar"),
}


def is_page(path: str) -> bool:
    """Whether `path` belongs to the pages (`/`, `/records/...`, `/s/...`), also when no route
    matched it."""
    if path == "/":  # the front page; other unmatched paths stay the API's
        return True
    root = path.split("/", 2)[1]
    return root in PAGE_ROOTS or SITEMAPS.fullmatch(root) is not None


def page_of_error(path: str, status: int) -> Response | None:
    """The HTML page of an error of `path` if it is a page's (the factory hands this to
    app/errors.py), else None."""
    return error_page(status, folder=path.startswith("/browse/")) if is_page(path) else None


def error_page(status: int, folder: bool = False) -> Response:
    """The HTML page of an error status, with that status; `folder`: the address names a
    folder (a 404 then says no such folder, not no such file)."""
    _bind_urls()
    title = TITLES.get(status, _("Fehler"))
    response = Response(render_page("pages/error.html", status=status, title=title, folder=folder))
    response.status_code = status
    return response


#: The name the page's addresses are built under when the request's Host is no name.
_FALLBACK_NAME = "localhost"


def _bind_urls() -> None:
    """A request whose Host cannot be a name (a label over 63 characters fails IDNA: Werkzeug
    answers BadHost, 400) has no URL adapter, and the error page's links need one (`url_for`
    would fail, answering 500). They are relative, so any name serves: the server's own."""
    context = request_ctx._get_current_object()  # type: ignore[attr-defined]
    if context.url_adapter is not None:
        return
    name = str(request.environ.get("SERVER_NAME") or _FALLBACK_NAME)
    try:
        name.encode("idna")
    except UnicodeError:
        name = _FALLBACK_NAME
    context.url_adapter = current_app.url_map.bind(
        name, script_name=request.root_path or "/", url_scheme=request.scheme
    )
