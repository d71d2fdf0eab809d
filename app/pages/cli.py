"""`flask pages citations`: keep the Cite box and the page of every record whose kept ones are
missing or no longer fit (after an upgrade to migration 0018, 0019 or 0020, a new release,
another `REPOSITORY_NAME` or `OAI_NAMESPACE`, records written by SQL, or an embargo that has
ended since the record was written: run it daily). Pages are right without it, only slower."""

from __future__ import annotations

from typing import Any

import click
from flask import current_app
from flask.cli import AppGroup
from sqlalchemy import Row, select

from app.database import lock_database_on_sqlite
from app.extensions import db
from app.files.access import embargo_active, today
from app.models import FileRecord, RecordCitation
from app.pages import kept
from app.pages.stored import citation_row, keep, kept_row

pages_cli = AppGroup("pages", help="Landing pages.")
#: Records read per round trip; each round's citations are written in one transaction.
BATCH = 500


@pages_cli.command("citations")
def citations_command() -> None:
    """Render and keep the citations and pages that are missing or no longer fit."""
    checked, written = refresh_citations(current_app.config["REPOSITORY_NAME"])
    click.echo(f"citations and pages: {checked} records checked, {written} kept anew")


def refresh_citations(repository: str) -> tuple[int, int]:
    """Walk every record in id order; returns (records checked, records kept anew)."""
    table = RecordCitation.__table__
    columns = FileRecord.__table__.columns
    checked = written = 0
    last = None
    while True:
        query = (
            select(*columns, table.c.key, table.c.page_key)
            .outerjoin(table, table.c.record_id == FileRecord.id)
            .order_by(FileRecord.id)
            .limit(BATCH)
        )
        if last is not None:
            query = query.where(FileRecord.id > last)
        # Locked until the batch is written: a record deleted meanwhile would fail its insert.
        lock_database_on_sqlite(db.session)
        rows = db.session.execute(query.with_for_update(of=FileRecord)).all()
        if not rows:
            return checked, written
        stale = [kept for row in rows if (kept := _kept(row, repository)) is not None]
        keep(db.session.connection(), stale)
        db.session.commit()
        checked += len(rows)
        written += len(stale)
        last = rows[-1].id


def _kept(row: Row[Any], repository: str) -> dict[str, Any] | None:
    """The row to keep for a record, or None when its kept one still fits."""
    cited = citation_row(row, repository)
    page_key = kept.page_key(row, embargo_active(row, today()), repository, cited["key"])
    if row.key == cited["key"] and row.page_key == page_key:
        return None
    return kept_row(row, repository)
