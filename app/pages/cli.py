"""`flask pages refresh-citations`: render and store the Cite box of every record whose stored
one is missing or stale (app/pages/stored.py). Whether a stored one fits is told by its key,
worked out from the record without rendering (`citation.citation_key`); only the missing and
stale ones are rendered. Pages are right without it, each rendering its own citation until
the command has run: run it after an upgrade that changes the citation's style or renderer
(a new `citation.csl`, app/pages/citation.py or citeproc-py), another `REPOSITORY_NAME`, or
after records were written by SQL or a bulk load."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import AppGroup
from sqlalchemy import select

from app.database import lock_database_on_sqlite
from app.extensions import db
from app.models import FileRecord, RecordCitation, Series
from app.pages.stored import citation_row, keep, key_of

pages_cli = AppGroup("pages", help="Landing pages.")
#: Records read per round trip; each round's citations are written in one transaction.
BATCH = 500


@pages_cli.command("refresh-citations")
def refresh_citations_command() -> None:
    """Render and store the citations that are missing or stale (rendering only those)."""
    checked, written = refresh_citations(current_app.config["REPOSITORY_NAME"])
    click.echo(f"citations: {checked} records checked, {written} rendered and stored")


def refresh_citations(repository: str) -> tuple[int, int]:
    """Walk every record in id order; returns (records checked, citations rendered)."""
    table = RecordCitation.__table__
    columns = FileRecord.__table__.columns
    checked = written = 0
    last = None
    while True:
        query = (
            select(*columns, table.c.key, Series.title.label("series_title"))
            .outerjoin(table, table.c.record_id == FileRecord.id)
            .outerjoin(Series, Series.slug == FileRecord.series_slug)
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
        stale = [
            citation_row(row, repository, row.series_title)
            for row in rows
            if row.key != key_of(row, repository, row.series_title)
        ]
        keep(db.session.connection(), stale)
        db.session.commit()
        checked += len(rows)
        written += len(stale)
        last = rows[-1].id
