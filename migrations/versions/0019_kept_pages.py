"""Record pages rendered when a record is written (issue 25 item 9): three columns beside its
kept citation.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26

Records written before this revision keep no page: theirs is rendered as it is viewed (the
same page) until `flask pages citations` keeps it, or the record is written again. About 4 KB
a record once PostgreSQL has compressed both languages.
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("record_citations") as table:
        table.add_column(sa.Column("page_key", sa.String(length=32), nullable=True))
        table.add_column(sa.Column("page_de", sa.Text(), nullable=True))
        table.add_column(sa.Column("page_en", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("record_citations") as table:
        table.drop_column("page_en")
        table.drop_column("page_de")
        table.drop_column("page_key")
