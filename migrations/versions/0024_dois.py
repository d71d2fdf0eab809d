"""DOIs (issue 40): one row per DOI reserved for a record, which is also the DataCite outbox.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-28

A new table only; the downgrade drops it, and with it every DOI the service knew of (they stay
at DataCite).
"""

import sqlalchemy as sa
from alembic import op

import app.models

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

UTC_TIMESTAMP = app.models.UTCDateTime()


def upgrade() -> None:
    op.create_table(
        "dois",
        sa.Column("doi", sa.String(length=255), nullable=False),
        sa.Column("record_id", sa.Uuid(), nullable=False),
        sa.Column("created_at", UTC_TIMESTAMP, nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=True),
        sa.Column("wanted", sa.String(length=16), nullable=False),
        sa.Column("payload_hash", sa.String(length=64), nullable=True),
        sa.Column("due_at", UTC_TIMESTAMP, nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_attempt_at", UTC_TIMESTAMP, nullable=True),
        sa.Column("registered_at", UTC_TIMESTAMP, nullable=True),
        sa.Column("withdrawn_at", UTC_TIMESTAMP, nullable=True),
        sa.Column("withdrawn_reason", sa.String(length=255), nullable=True),
        sa.Column("tombstone_title", sa.String(length=255), nullable=True),
        sa.Column("tombstone_citation", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("doi"),
        sa.UniqueConstraint("record_id"),
    )
    op.create_index("ix_dois_due", "dois", ["due_at"])


def downgrade() -> None:
    op.drop_index("ix_dois_due", table_name="dois")
    op.drop_table("dois")
