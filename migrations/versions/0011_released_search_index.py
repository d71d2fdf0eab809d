"""A GIN index over the search column of released records only (issue 13, public search).

The public list searches released records only (`freigabe IS true`, written as
`access.visible(None)` in app/files/access.py writes it). With the index of migration 0009
over all records, a public search intersects
the posting lists of every record and then visits each matching row in the table to drop the
unreleased ones; this partial index holds released records only, so its posting lists are
about a fifth shorter and every row it finds is one the answer counts and ranks. Searches of
signed-in callers (own records, or all of them for administrators) keep using the index of
0009. PostgreSQL only: SQLite's FTS5 table has no partial form and needs none at its scale.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-23
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

INDEX = "ix_file_records_search_released"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    # `freigabe IS true`, not `WHERE freigabe`: PostgreSQL only uses a partial index whose
    # condition it can prove from the query's, and the application writes `IS true`.
    op.execute(
        f"CREATE INDEX {INDEX} ON file_records USING gin (search_vector) WHERE freigabe IS true"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"DROP INDEX {INDEX}")
