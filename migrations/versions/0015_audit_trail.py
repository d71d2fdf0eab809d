"""Audit trail (issue 23): the hash-chained entries and the chain's head.

Revision ID: 0015
Revises: 0011
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

import app.models

revision = "0015"
down_revision = "0011"
branch_labels = None
depends_on = None

GENESIS = "0" * 64


def upgrade() -> None:
    op.create_table(
        "audit_entries",
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("at", app.models.UTCDateTime(), nullable=False),
        sa.Column("actor_id", sa.Integer(), nullable=True),
        sa.Column("actor", sa.String(length=255), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("record_id", sa.Uuid(), nullable=True),
        sa.Column("account_id", sa.Integer(), nullable=True),
        sa.Column("changes", sa.Text(), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=True),
        sa.Column("prev_hash", sa.String(length=64), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
    )
    op.create_index("ix_audit_entries_record", "audit_entries", ["record_id", "seq"])
    op.create_index("ix_audit_entries_actor", "audit_entries", ["actor", "seq"])
    op.create_index("ix_audit_entries_action", "audit_entries", ["action", "seq"])
    op.create_index("ix_audit_entries_at", "audit_entries", ["at"])
    head = op.create_table(
        "audit_chain_head",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("last_hash", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.bulk_insert(head, [{"id": 1, "last_seq": 0, "last_hash": GENESIS}])


def downgrade() -> None:
    op.drop_table("audit_chain_head")
    op.drop_index("ix_audit_entries_at", table_name="audit_entries")
    op.drop_index("ix_audit_entries_action", table_name="audit_entries")
    op.drop_index("ix_audit_entries_actor", table_name="audit_entries")
    op.drop_index("ix_audit_entries_record", table_name="audit_entries")
    op.drop_table("audit_entries")
