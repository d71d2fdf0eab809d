"""Four-eyes release approval (issue 38): approvers, release requests, the editors since the
last approval, and the mail outbox.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28

Only new tables and one new column with a default, so the upgrade neither rewrites nor locks
`file_records`. The downgrade drops them again: requests, their history and unsent mail go.
"""

import sqlalchemy as sa
from alembic import op

import app.models

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

UTC_TIMESTAMP = app.models.UTCDateTime()


def upgrade() -> None:
    with op.batch_alter_table("users") as table:
        table.add_column(
            sa.Column("is_approver", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.create_table(
        "release_requests",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("record_id", sa.Uuid(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("sperrfrist", sa.Date(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("content_sha256", sa.String(length=64), nullable=False),
        sa.Column("public_hash", sa.String(length=64), nullable=False),
        sa.Column("submitted_by", sa.Integer(), nullable=True),
        sa.Column("submitted_at", UTC_TIMESTAMP, nullable=False),
        sa.Column("decided_by", sa.Integer(), nullable=True),
        sa.Column("decided_at", UTC_TIMESTAMP, nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("override", sa.Boolean(), nullable=False),
        sa.Column("changes", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_release_requests_record_id", "release_requests", ["record_id"])
    op.create_index("ix_release_requests_state", "release_requests", ["state", "submitted_at"])
    op.create_index("ix_release_requests_submitted", "release_requests", ["submitted_at"])
    op.create_index(
        "ix_release_requests_pending",
        "release_requests",
        ["record_id"],
        unique=True,
        postgresql_where=sa.text("state = 'pending'"),
        sqlite_where=sa.text("state = 'pending'"),
    )
    op.create_table(
        "release_editors",
        sa.Column("record_id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("record_id", "user_id"),
    )
    op.create_table(
        "mail_outbox",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("recipient", sa.String(length=255), nullable=False),
        sa.Column("subject", sa.String(length=255), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", UTC_TIMESTAMP, nullable=False),
        sa.Column("next_attempt_at", UTC_TIMESTAMP, nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("sent_at", UTC_TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_mail_outbox_due", "mail_outbox", ["sent_at", "next_attempt_at"])


def downgrade() -> None:
    op.drop_index("ix_mail_outbox_due", table_name="mail_outbox")
    op.drop_table("mail_outbox")
    op.drop_table("release_editors")
    op.drop_index("ix_release_requests_pending", table_name="release_requests")
    op.drop_index("ix_release_requests_submitted", table_name="release_requests")
    op.drop_index("ix_release_requests_state", table_name="release_requests")
    op.drop_index("ix_release_requests_record_id", table_name="release_requests")
    op.drop_table("release_requests")
    with op.batch_alter_table("users") as table:
        table.drop_column("is_approver")
