"""A held change binds the state it starts from (issue 38 review): the released record's
SHA-256 and public fields' hash when the change was held.

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-28

New nullable columns on `release_requests` only. Requests held before have none: their
approval checks what it checked before (the waiting change itself).
"""

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("release_requests") as table:
        table.add_column(sa.Column("base_sha256", sa.String(length=64), nullable=True))
        table.add_column(sa.Column("base_hash", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("release_requests") as table:
        table.drop_column("base_hash")
        table.drop_column("base_sha256")
