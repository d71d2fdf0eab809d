"""A record's DOI, for whoever shows records: pages, exports, OAI-PMH, API answers."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from flask import current_app
from sqlalchemy import select

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
