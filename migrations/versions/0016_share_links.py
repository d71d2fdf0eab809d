"""Share links (issue 24): token-less, expiring links to a record or a folder.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

import app.models

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "share_links",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=False),
        sa.Column("record_id", sa.Uuid(), nullable=True),
        sa.Column("path", sa.String(length=255), nullable=True),
        sa.Column("description", sa.String(length=255), nullable=True),
        sa.Column("created_at", app.models.UTCDateTime(), nullable=False),
        sa.Column("expires_at", app.models.UTCDateTime(), nullable=False),
        sa.Column("revoked_at", app.models.UTCDateTime(), nullable=True),
        sa.Column("downloads", sa.BigInteger(), nullable=False),
        sa.Column("first_used_at", app.models.UTCDateTime(), nullable=True),
        sa.Column("last_used_at", app.models.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(["created_by"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("secret_hash"),
    )
    op.create_index("ix_share_links_created_by", "share_links", ["created_by"])
    op.create_index("ix_share_links_record_id", "share_links", ["record_id"])
    op.create_index("ix_share_links_path", "share_links", ["path"])


def downgrade() -> None:
    op.drop_table("share_links")
