"""Kept pages stay in their row (issue 25 item 9): PostgreSQL moves a row's long values out
into its TOAST table once the row passes 2 KB, so reading a kept page took an index lookup
and two or three more pages there, most of them misses in a large table, and those made the
record page's slowest twentieth. With `toast_tuple_target` at its largest, a row of both
languages' pages (about 5.5 KB compressed) is kept whole in its own table page.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-26

Only rows written from now on are kept inline: `flask pages citations`, which an upgrade
needs anyway (every release changes the pages' layout), writes them all again. The table
takes about 8 KB a record instead of 5.7 (one row a page); a row longer than that (a long
description) is still moved out, as before. SQLite has no such storage: nothing to do there.
"""

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

#: The largest value PostgreSQL accepts (BLCKSZ - 32 on 8 KB pages).
INLINE_UP_TO = 8160


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE record_citations SET (toast_tuple_target = {INLINE_UP_TO})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE record_citations RESET (toast_tuple_target)")
