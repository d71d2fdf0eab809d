"""The Cite box rendered when a record is written (issue 25 item 9): one row per record.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26

Records written before this revision have no row: their pages render the citation as they
are viewed (the same text) until `flask pages citations` keeps theirs, or a change of what
their citation prints does. A later batch migration that rebuilds `file_records` on SQLite
(foreign keys on) empties this table through the cascade: run the command after it.
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "record_citations",
        sa.Column("record_id", sa.Uuid(), nullable=False),
        sa.Column("key", sa.String(length=32), nullable=False),
        sa.Column("de", sa.Text(), nullable=False),
        sa.Column("en", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["record_id"], ["file_records.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("record_id"),
    )


def downgrade() -> None:
    op.drop_table("record_citations")
