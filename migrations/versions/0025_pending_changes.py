"""A change of a released record waiting for approval beside it (issue 38): its public fields
and its new content on the release request.

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-28

New nullable columns on `release_requests` only; `file_records` is neither rewritten nor
locked. The downgrade drops them: pending changes are then lost, and their objects become
orphans that `flask storage reconcile --fix` removes (cancel pending requests first).
"""

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("release_requests") as table:
        table.add_column(sa.Column("pending_fields", sa.Text(), nullable=True))
        table.add_column(sa.Column("pending_stored_path", sa.String(length=512), nullable=True))
        table.add_column(sa.Column("pending_size", sa.BigInteger(), nullable=True))
        table.add_column(sa.Column("pending_mime_type", sa.String(length=255), nullable=True))
        table.add_column(sa.Column("pending_original_name", sa.String(length=255), nullable=True))
        table.add_column(sa.Column("pending_change_note", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("release_requests") as table:
        for name in (
            "pending_change_note",
            "pending_original_name",
            "pending_mime_type",
            "pending_size",
            "pending_stored_path",
            "pending_fields",
        ):
            table.drop_column(name)
