"""Record pages are no longer kept (issue 34 item 1): the columns of migration 0019 go, and
the table option of migration 0020 is reset.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28

A page kept at its record's write saved 0.4-0.7 ms of a cold view, and cost about 6 KB a
record (7.8 GB at 1,000,000 records against 1.4 GB for the records), a rewrite of the whole
table after every release, renders inside every write transaction and a daily command. Each
view now renders its page from one read (app/pages/routes.py). Only the stored citation stays
in `record_citations`; its rows are short again, so PostgreSQL's default `toast_tuple_target`
fits them. Dropping the columns frees no disk space by itself: PostgreSQL reuses it for new
rows, and a `VACUUM FULL record_citations` (which locks the table while it rewrites it)
gives it back. The downgrade adds the columns again, empty: every page renders itself until
`flask pages citations` of that release keeps them.
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

#: The value migration 0020 set (BLCKSZ - 32 on 8 KB pages).
INLINE_UP_TO = 8160


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE record_citations RESET (toast_tuple_target)")
    with op.batch_alter_table("record_citations") as table:
        table.drop_column("page_en")
        table.drop_column("page_de")
        table.drop_column("page_key")


def downgrade() -> None:
    with op.batch_alter_table("record_citations") as table:
        table.add_column(sa.Column("page_key", sa.String(length=32), nullable=True))
        table.add_column(sa.Column("page_de", sa.Text(), nullable=True))
        table.add_column(sa.Column("page_en", sa.Text(), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE record_citations SET (toast_tuple_target = {INLINE_UP_TO})")
