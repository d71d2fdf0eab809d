"""Resumable uploads (issue 14): the state of unfinished tus uploads.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

import app.models

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "resumable_uploads",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("record_id", sa.Uuid(), nullable=False),
        sa.Column("stored_path", sa.String(length=512), nullable=False),
        sa.Column("upload_metadata", sa.Text(), nullable=False),
        sa.Column("length", sa.BigInteger(), nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.Column("storage_state", sa.Text(), nullable=False),
        sa.Column("created_at", app.models.UTCDateTime(), nullable=False),
        sa.Column("expires_at", app.models.UTCDateTime(), nullable=False),
        sa.Column("completed_at", app.models.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_resumable_uploads_user_id", "resumable_uploads", ["user_id"])
    op.create_index("ix_resumable_uploads_expires_at", "resumable_uploads", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_resumable_uploads_expires_at", table_name="resumable_uploads")
    op.drop_index("ix_resumable_uploads_user_id", table_name="resumable_uploads")
    op.drop_table("resumable_uploads")
