"""A record's DOI, for whoever shows records: pages, exports, OAI-PMH, API answers."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from flask import current_app
from sqlalchemy import select

from app.exceptions import RecordNotFound, RecordWithdrawn
from app.extensions import db
from app.models import Doi

RESOLVER = "https://doi.org/"


def configured() -> bool:
    """Whether DOIs are on (`DATACITE_*` all set; a half configuration never starts)."""
    return bool(current_app.config.get("DATACITE_URL"))


def doi_of(record_id: uuid.UUID) -> Doi | None:
    """The record's DOI (also of a deleted record: its tombstone), None when DOIs are off."""
    if not configured():
        return None
    return db.session.scalars(select(Doi).where(Doi.record_id == record_id)).first()


def dois_of(record_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, Doi]:
    """The DOIs of these records by record id, in one query (none when DOIs are off)."""
    ids = list(record_ids)
    if not ids or not configured():
        return {}
    return {d.record_id: d for d in db.session.scalars(select(Doi).where(Doi.record_id.in_(ids)))}


def shown(doi: Doi | None) -> str | None:
    """The DOI as readers should see it: none for a reservation being released."""
    if doi is None or doi.wanted == "deleted":
        return None
    return doi.doi


def url(doi: str) -> str:
    """The DOI's resolver address, as citations print it."""
    return RESOLVER + doi


#: What `Doi.withdrawn_reason` holds when the record itself left public view: the pages say
#: these in the reader's language; any other value is shown as it is written.
DELETED = "deleted"
UNRELEASED = "unreleased"


def withdrawn(doi: Doi | None) -> bool:
    """Whether the DOI's record left public view: its addresses answer a tombstone (410)."""
    return doi is not None and shown(doi) is not None and doi.withdrawn_at is not None


def withdrawal(doi: Doi) -> RecordWithdrawn:
    """The 410 a withdrawn DOI's record answers instead of 404, naming the DOI."""
    return RecordWithdrawn(f"Gone: this record was withdrawn; its DOI {doi.doi} stays.", doi)


def gone_when_withdrawn(view: Callable[..., Any]) -> Callable[..., Any]:
    """A public door of a record (its API answers, its page, its exports): where `view` finds
    no public record, a DOI-bearing record that left public view answers 410 naming its DOI,
    never 404. The one place every public door decides it; pages render the 410 as the
    tombstone (app/pages/tombstones.py)."""

    @functools.wraps(view)
    def door(record_id: uuid.UUID, **kwargs: Any) -> Any:
        try:
            return view(record_id, **kwargs)
        except RecordNotFound:
            doi = doi_of(record_id)
            if doi is not None and withdrawn(doi):
                raise withdrawal(doi) from None
            raise

    return door
