"""What a record's page addresses answer when the record is not public but has a DOI (issue
40): a DOI-bearing id never answers a bare 404. A record that left public view (deleted, or
no longer released) answers 410 with its tombstone: the citation kept at withdrawal, the DOI,
when and why. A record whose DOI is reserved but that is not public yet answers 404 naming
the DOI as reserved, and nothing else of the record. A reader asking for JSON gets the API's
error shape with the same status."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from datetime import UTC
from typing import Any

from flask import Response, jsonify, request
from flask_babel import lazy_gettext as _

from app.doi import lookup
from app.exceptions import RecordNotFound, RecordWithdrawn
from app.models import Doi
from app.pages.i18n import render_page
from app.pages.records import clean_text, link_header

#: Why a record was withdrawn, as a reader is told (app/doi/lookup.py names the values).
REASONS = {
    lookup.DELETED: _("Die Datei wurde gelöscht."),
    lookup.UNRELEASED: _("Die Datei ist nicht mehr öffentlich freigegeben."),
}
#: The tombstone and the reservation notice are no pages of their own for search engines.
NOINDEX = {"X-Robots-Tag": "noindex"}


def answered(view: Callable[..., Response]) -> Callable[..., Response]:
    """`view` of a record's address: the 410 of a withdrawn DOI-bearing record (decided by
    `lookup.gone_when_withdrawn`, as for every public door) as its tombstone page, and a
    reserved DOI's notice where the view finds no public record."""
    door = lookup.gone_when_withdrawn(view)

    @functools.wraps(view)
    def answer(record_id: uuid.UUID, **kwargs: Any) -> Response:
        try:
            return door(record_id, **kwargs)
        except RecordWithdrawn as withdrawn:
            return gone(withdrawn.doi)
        except RecordNotFound:
            doi = lookup.doi_of(record_id)
            if doi is None or lookup.shown(doi) is None:
                raise
            return reserved(doi)

    return answer


def _answer(html: Callable[[], str], error: RecordNotFound | RecordWithdrawn) -> Response:
    """The page, or the API's error shape to a reader asking for JSON, with the error's
    status: one address, two bodies, so a shared cache keys them by `Accept` too."""
    offered = ["text/html", "application/json"]
    if request.accept_mimetypes.best_match(offered) == "application/json":
        response = jsonify(error.body())
    else:
        response = Response(html())
    response.status_code = error.status
    response.vary.add("Accept")
    response.headers.update(NOINDEX)
    return response


def gone(doi: Doi) -> Response:
    """410: the tombstone page (or the JSON error), citing the DOI."""
    response = _answer(
        lambda: render_page(
            "pages/tombstone.html",
            doi=doi.doi,
            doi_url=lookup.url(doi.doi),
            citation=clean_text(doi.tombstone_citation or doi.tombstone_title),
            withdrawn=doi.withdrawn_at.astimezone(UTC).date() if doi.withdrawn_at else None,
            reason=_reason(doi.withdrawn_reason),
        ),
        lookup.withdrawal(doi),
    )
    response.headers["Link"] = link_header([(lookup.url(doi.doi), "cite-as", None)])
    return response


def reserved(doi: Doi) -> Response:
    """404 naming the DOI as reserved, and nothing else of the record."""
    message = f"Not found: the DOI {doi.doi} is reserved for a record that is not public yet."
    return _answer(lambda: render_page("pages/reserved.html", doi=doi.doi), RecordNotFound(message))


def _reason(reason: str | None) -> str:
    if reason in REASONS:
        return str(REASONS[reason])
    return clean_text(reason)
