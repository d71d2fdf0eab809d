"""Errors of page paths answer an HTML page, not the API's JSON (app/errors.py asks here)."""

from __future__ import annotations

from flask import Response, render_template

#: First path segments served by this package; an error under them is an HTML page.
PAGE_ROOTS = frozenset({"records"})

#: What a reader is told, in German until the pages get their translations.
TITLES = {
    403: "Nicht freigegeben",
    404: "Nicht gefunden",
    405: "Methode nicht erlaubt",
    429: "Zu viele Anfragen",
    500: "Serverfehler",
    503: "Dienst nicht erreichbar",
}


def is_page(path: str) -> bool:
    """Whether `path` belongs to the pages (`/records/...`), also when no route matched it."""
    return path.split("/", 2)[1] in PAGE_ROOTS


def error_page(status: int) -> Response:
    """The HTML page of an error status, with that status."""
    title = TITLES.get(status, "Fehler")
    response = Response(render_template("pages/error.html", status=status, title=title))
    response.status_code = status
    return response
