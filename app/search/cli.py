"""`flask search reindex`: rebuild the search index, e.g. after a restore."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.extensions import db
from app.search.index import reindex

search_cli = AppGroup("search", help="Full-text search index.")


@search_cli.command("reindex")
def reindex_command() -> None:
    """Rebuild the search index from the records (SQLite: the FTS5 table; PostgreSQL: the GIN
    indexes over the generated column)."""
    count = reindex(db.session)
    click.echo(f"search index rebuilt: {count} records")
