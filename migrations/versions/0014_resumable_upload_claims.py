"""Resumable uploads (issue 21 item 4): a claim per upload, so that one PATCH at a time
writes it and completion runs exactly once, across threads, processes and replicas.

Revision ID: 0014
Revises: 0012
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

import app.models

revision = "0014"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("resumable_uploads") as batch:
        batch.add_column(sa.Column("claim", sa.Uuid(), nullable=True))
        batch.add_column(sa.Column("claimed_until", app.models.UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("resumable_uploads") as batch:
        batch.drop_column("claimed_until")
        batch.drop_column("claim")
