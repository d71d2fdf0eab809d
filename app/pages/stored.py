"""Citations rendered when a record is written, so that a page need not render its own.

A record's Cite box is kept in `record_citations` (one row per record, removed with it) by
the ORM's flush events, which `init_app` wires: whatever writes a record through the session
(upload, tus, PATCH, replacement, bulk import, the CLI) renders it in the same transaction.
A record written any other way (SQL by hand, a bulk load, an older release) keeps no row or a
row whose key no longer fits; its page then renders the citation itself
(app/pages/citation.py), and `flask pages refresh-citations` (app/pages/cli.py) renders it.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

from flask import current_app, has_app_context
from sqlalchemy import Connection, event, inspect, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Mapper

from app.files.access import publication_date
from app.models import FileRecord, RecordCitation, Series
from app.pages import exports
from app.pages.citation import ADDRESS, citation_key, stored_citations
from app.pages.records import SeriesRef, clean_text, person, title_of
from app.schemas.attribution import people_of

#: The attributes a citation is made from (`record_page` and `exports.csl_item`).
CITED = (
    "titel",
    "original_name",
    "autoren",
    "mime_type",
    "created_at",
    "version",
    "series_slug",
    "series_number",
    "creators",
    "sperrfrist",
)
_TABLE = RecordCitation.__table__
log = logging.getLogger(__name__)


def cited_item(record: Any, repository: str, series_title: str | None = None) -> dict[str, Any]:
    """The CSL-JSON item a record's citation is rendered from (anything with the record's
    attributes, and the title of its series): the values of its page (`records.record_page`)
    that the item cites, the address a placeholder. Needs no request, so a write from the CLI
    keeps its citation too."""
    series = None
    if record.series_slug and series_title is not None:
        number = clean_text(record.series_number)
        series = SeriesRef(record.series_slug, clean_text(series_title), number, "")
    people = [found for found in map(person, people_of(record)) if found.name]
    cited = SimpleNamespace(
        id=str(record.id),
        title=title_of(record),
        people=people,
        published=publication_date(record),
        mime_type=record.mime_type,
        repository=repository,
        urls=SimpleNamespace(page=ADDRESS),
        description="",
        keywords=[],
        themes=[],
        version=record.version or 1,
        doi=None,  # the address (a DOI's or the page's) is the page's to fill in
        series=series,
    )
    return exports.csl_item(cited)


def series_title(connection: Connection, slug: str | None) -> str | None:
    """The title of the series `slug` (None: none)."""
    if slug is None:
        return None
    return connection.execute(select(Series.title).where(Series.slug == slug)).scalar()


def key_of(record: Any, repository: str, series: str | None = None) -> str:
    """The key a record's stored citation has while it fits, worked out without rendering
    (`series`: the title of its series)."""
    return citation_key(cited_item(record, repository, series))


def citation_row(record: Any, repository: str, series: str | None = None) -> dict[str, Any]:
    """The `record_citations` row of a record: its citation rendered in every page language
    with a placeholder for its address, and its key (`series`: the title of its series)."""
    return {"record_id": record.id, **stored_citations(cited_item(record, repository, series))}


def keep(connection: Connection, rows: list[dict[str, Any]]) -> None:
    """Write citation rows, each replacing the record's stored one: one statement, so that two
    writers of the same record (a change and `flask pages refresh-citations`) never collide."""
    if not rows:
        return
    dialect = connection.dialect.name
    statement = (postgresql_insert if dialect == "postgresql" else sqlite_insert)(_TABLE)
    replaced = {name: statement.excluded[name] for name in ("key", "de", "en")}
    connection.execute(
        statement.on_conflict_do_update(index_elements=["record_id"], set_=replaced), rows
    )


def _store(connection: Connection, record: FileRecord) -> None:
    if not has_app_context():
        return
    try:
        title = series_title(connection, record.series_slug)
        row = citation_row(record, current_app.config["REPOSITORY_NAME"], title)
    except Exception:  # the write goes on; its page renders the citation itself
        log.exception("citation of record %s not kept", record.id)
        return
    keep(connection, [row])


def _inserted(mapper: Mapper[Any], connection: Connection, record: FileRecord) -> None:
    _store(connection, record)


def _updated(mapper: Mapper[Any], connection: Connection, record: FileRecord) -> None:
    state = inspect(record)
    if any(state.attrs[name].history.has_changes() for name in CITED):
        _store(connection, record)


def init_app() -> None:
    """Render and keep a record's citation whenever the session writes the record."""
    for name, listener in (("after_insert", _inserted), ("after_update", _updated)):
        if not event.contains(FileRecord, name, listener):
            event.listen(FileRecord, name, listener)
