"""Full-text search, OAI-PMH tombstones (issue 13).

PostgreSQL: the text search configuration `file_search` (a copy of `german`, with `unaccent`
in front of the stemmer where that extension can be installed), the stored generated column
`file_records.search_vector` built with it and a GIN index over it. SQLite: the FTS5 table
`file_search`, filled by the application in the same transaction as each record
(app/search/index.py) and here from the records that exist.

Both: `oai_tombstones` (released records that were deleted or unreleased, for the OAI-PMH
`deleted` headers), a partial index of released records in datestamp order for harvesting and
an index on `sperrfrist` for the feeds (the embargoes that ended most recently).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def _text(columns):
    """The columns as one text, with the separators of file names and case numbers made
    spaces (so `AKT-2021-0042` and `bericht_2021.pdf` are words, as a query splits them)."""
    joined = " || ' ' || ".join(f"coalesce({name}, '')" for name in columns)
    return f"translate({joined}, '-_./', '    ')"


def _vector(columns, weight):
    return f"setweight(to_tsvector('file_search'::regconfig, {_text(columns)}), '{weight}')"


SEARCH_VECTOR = " || ".join(
    [
        _vector(["titel"], "A"),
        _vector(["autoren", "sachschlagwoerter", "org_themen"], "B"),
        _vector(["aktiv_id", "reprotyp", "original_name"], "C"),
        _vector(["beschreibung"], "D"),
    ]
)

FTS5_TABLE = (
    "CREATE VIRTUAL TABLE file_search USING fts5("
    "record_id UNINDEXED, titel, people, codes, beschreibung, "
    "tokenize = 'unicode61 remove_diacritics 2')"
)


def _postgres_search():
    bind = op.get_bind()
    available = bind.execute(
        sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'unaccent'")
    ).first()
    unaccent = False
    if available:
        savepoint = bind.begin_nested()
        try:
            op.execute("CREATE EXTENSION IF NOT EXISTS unaccent")
            savepoint.commit()
            unaccent = True
        except sa.exc.DBAPIError:  # no right to create extensions: search without it
            savepoint.rollback()
    op.execute("CREATE TEXT SEARCH CONFIGURATION file_search (COPY = german)")
    if unaccent:
        op.execute(
            "ALTER TEXT SEARCH CONFIGURATION file_search "
            "ALTER MAPPING FOR hword, hword_part, word WITH unaccent, german_stem"
        )
    op.execute(
        f"ALTER TABLE file_records ADD COLUMN search_vector tsvector "
        f"GENERATED ALWAYS AS ({SEARCH_VECTOR}) STORED"
    )
    op.execute("CREATE INDEX ix_file_records_search ON file_records USING gin (search_vector)")


def _sqlite_search():
    from app.search.index import rebuild_fts  # the stemmer the application writes with

    op.execute(FTS5_TABLE)
    rebuild_fts(op.get_bind())


def upgrade():
    if op.get_bind().dialect.name == "postgresql":
        _postgres_search()
    else:
        _sqlite_search()
    op.create_table(
        "oai_tombstones",
        sa.Column("record_id", sa.Uuid(), nullable=False),
        sa.Column("path", sa.String(length=255), nullable=True),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("record_id"),
    )
    op.create_index("ix_oai_tombstones_deleted", "oai_tombstones", ["deleted_at", "record_id"])
    op.create_index(
        "ix_file_records_released_updated",
        "file_records",
        ["updated_at", "id"],
        # As `released()` writes the condition: PostgreSQL does not match `freigabe IS true`
        # to an index on `WHERE freigabe`.
        postgresql_where=sa.text("freigabe IS true"),
        sqlite_where=sa.text("freigabe IS 1"),
    )
    op.create_index("ix_file_records_sperrfrist", "file_records", ["sperrfrist"])


def downgrade():
    op.drop_index("ix_file_records_sperrfrist", table_name="file_records")
    op.drop_index("ix_file_records_released_updated", table_name="file_records")
    op.drop_index("ix_oai_tombstones_deleted", table_name="oai_tombstones")
    op.drop_table("oai_tombstones")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX ix_file_records_search")
        op.execute("ALTER TABLE file_records DROP COLUMN search_vector")
        op.execute("DROP TEXT SEARCH CONFIGURATION file_search")
    else:
        op.execute("DROP TABLE file_search")
