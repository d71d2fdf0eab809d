"""Errors of page paths answer an HTML page, not the API's JSON (app/errors.py asks here)."""

from __future__ import annotations

from flask import Response, render_template
from flask_babel import lazy_gettext as _

#: First path segments served by this package; an error under them is an HTML page.
PAGE_ROOTS = frozenset({"records"})

#: What a reader is told (German source strings; app/translations has the English).
TITLES = {
    403: _("Nicht freigegeben"),
    404: _("Nicht gefunden"),
    405: _("Methode nicht erlaubt"),
    429: _("Zu viele Anfragen"),
    500: _("Serverfehler"),
    503: _("Dienst nicht erreichbar"),
}


def is_page(path: str) -> bool:
    """Whether `path` belongs to the pages (`/records/...`), also when no route matched it."""
    return path.split("/", 2)[1] in PAGE_ROOTS


def error_page(status: int) -> Response:
    """The HTML page of an error status, with that status."""
    title = TITLES.get(status, _("Fehler"))
    response = Response(render_template("pages/error.html", status=status, title=title))
    response.status_code = status
    return response
