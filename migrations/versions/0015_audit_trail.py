"""Audit trail (issue 23): hash-chained entries and the heads of their chains.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

import app.models

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

GENESIS = "0" * 64
#: As many chains as writers may run at once with room to spare (app/audit/trail.py).
CHAINS = 32


def upgrade() -> None:
    op.create_table(
        "audit_entries",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.Identity(),
            nullable=False,
        ),
        sa.Column("chain", sa.Integer(), nullable=False),
        sa.Column("chain_seq", sa.BigInteger(), nullable=False),
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
    op.create_index("ix_audit_entries_chain", "audit_entries", ["chain", "chain_seq"], unique=True)
    op.create_index("ix_audit_entries_record", "audit_entries", ["record_id", "seq"])
    op.create_index("ix_audit_entries_actor", "audit_entries", ["actor", "seq"])
    op.create_index("ix_audit_entries_action", "audit_entries", ["action", "seq"])
    op.create_index("ix_audit_entries_at", "audit_entries", ["at"])
    heads = op.create_table(
        "audit_chain_heads",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("last_hash", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.bulk_insert(heads, [{"id": n, "last_seq": 0, "last_hash": GENESIS} for n in range(CHAINS)])


def downgrade() -> None:
    op.drop_table("audit_chain_heads")
    for name in ("at", "action", "actor", "record", "chain"):
        op.drop_index(f"ix_audit_entries_{name}", table_name="audit_entries")
    op.drop_table("audit_entries")
