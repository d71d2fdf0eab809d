"""Making and listing series; what a series is and where it is found."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from app import audit
from app.auth.services import Caller
from app.exceptions import AdministratorsOnly, DomainError
from app.extensions import db
from app.models import Series, utcnow
from app.schemas.attribution import SERIES_SET


class SeriesExists(DomainError):
    """The slug is taken (409): a series' address never changes hands."""

    status = 409


def set_spec(slug: str) -> str:
    return SERIES_SET + slug


def create(caller: Caller, values: dict[str, Any]) -> Series:
    """A new series, by an administrator (403 for anyone else, 409 for a slug taken), with
    its audit entry, committed."""
    if not caller.is_admin:
        raise AdministratorsOnly("Only administrators make series.")
    if db.session.get(Series, values["slug"]) is not None:
        raise SeriesExists(f"There is a series {values['slug']} already.")
    series = Series(**values, created_at=utcnow(), created_by=caller.id)
    db.session.add(series)
    audit.note(db.session, "series.create", {"slug": series.slug, "title": series.title})
    try:
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        raise SeriesExists(f"There is a series {values['slug']} already.") from None
    return series


def all_series() -> list[Series]:
    """Every series, by title."""
    return list(db.session.scalars(select(Series).order_by(Series.title, Series.slug)))
