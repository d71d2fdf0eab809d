"""Citations and pages rendered when a record is written, so that a view need not render them.

A record's Cite box and its page parts (app/pages/kept.py) are kept in `record_citations`
(one row per record, removed with it) by the ORM's flush events: whatever writes a record
through the session (upload, tus, PATCH, replacement, bulk import, the CLI) renders them in
the same transaction. A record written any other way (SQL by hand, a bulk load, an older
release) keeps no row or a row whose keys no longer fit; its page then renders the citation
(app/pages/citation.py) or the whole page itself.
"""

from __future__ import annotations

import logging
from datetime import UTC
from types import SimpleNamespace
from typing import Any

from flask import current_app, has_app_context
from sqlalchemy import Connection, event, inspect
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Mapper

from app.files.access import today
from app.models import FileRecord, RecordCitation
from app.pages import exports, kept
from app.pages.citation import ADDRESS, stored_citations
from app.pages.records import split_list, title_of

#: The attributes a citation is made from (`record_page` and `exports.csl_item`).
CITED = ("titel", "original_name", "autoren", "mime_type", "created_at")
#: ... and those a kept page prints: a change of any renders both again.
WRITTEN = tuple(dict.fromkeys((*CITED, *kept.PRINTED)))
_TABLE = RecordCitation.__table__
log = logging.getLogger(__name__)


def citation_row(record: Any, repository: str) -> dict[str, Any]:
    """The `record_citations` row of a record (anything with the record's attributes): the
    values of its page (`records.record_page`) that its CSL-JSON item cites, the address
    left out. Needs no request, so a write from the CLI keeps its citation too."""
    cited = SimpleNamespace(
        id=str(record.id),
        title=title_of(record),
        authors=split_list(record.autoren, ";"),
        published=record.created_at.astimezone(UTC).date(),
        mime_type=record.mime_type,
        repository=repository,
        urls=SimpleNamespace(page=ADDRESS),
        description="",
        keywords=[],
        themes=[],
    )
    return {"record_id": record.id, **stored_citations(exports.csl_item(cited))}


def kept_row(record: Any, repository: str) -> dict[str, Any]:
    """The whole `record_citations` row of a record: its citation and, where they render,
    its page parts (else none: its page renders itself). Needs an app context."""
    row = citation_row(record, repository)
    try:
        pages = kept.kept_pages(record, today(), repository, row)
    except Exception:  # the write goes on; its page renders itself
        log.exception("page of record %s not kept", record.id)
        return {**row, "page_key": None, "page_de": None, "page_en": None}
    return {**row, "page_key": pages.key, **{f"page_{k}": v for k, v in pages.texts.items()}}


def keep(connection: Connection, rows: list[dict[str, Any]]) -> None:
    """Write citation rows, each replacing the record's kept one: one statement, so that two
    writers of the same record (a change and `flask pages citations`) never collide."""
    if not rows:
        return
    dialect = connection.dialect.name
    statement = (postgresql_insert if dialect == "postgresql" else sqlite_insert)(_TABLE)
    columns = ("key", "de", "en", "page_key", "page_de", "page_en")
    replaced = {name: statement.excluded[name] for name in columns if name in rows[0]}
    connection.execute(
        statement.on_conflict_do_update(index_elements=["record_id"], set_=replaced), rows
    )


def _store(connection: Connection, record: FileRecord) -> None:
    if not has_app_context():
        return
    try:
        row = kept_row(record, current_app.config["REPOSITORY_NAME"])
    except Exception:  # the write goes on; its page renders the citation itself
        log.exception("citation of record %s not kept", record.id)
        return
    keep(connection, [row])


@event.listens_for(FileRecord, "after_insert")
def _inserted(mapper: Mapper[Any], connection: Connection, record: FileRecord) -> None:
    _store(connection, record)


@event.listens_for(FileRecord, "after_update")
def _updated(mapper: Mapper[Any], connection: Connection, record: FileRecord) -> None:
    state = inspect(record)
    if any(state.attrs[name].history.has_changes() for name in WRITTEN):
        _store(connection, record)
