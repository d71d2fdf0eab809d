"""Download statistics (issue 26): per-day counts, and the day's visitors and salt.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "stats_daily",
        sa.Column("record_id", sa.Uuid(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("door", sa.String(length=16), nullable=False),
        sa.Column("machine", sa.Boolean(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("unique_visitors", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("record_id", "day", "door", "machine"),
    )
    op.create_index("ix_stats_daily_day", "stats_daily", ["day"])
    op.create_table(
        "stats_visitors",
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("record_id", sa.Uuid(), nullable=False),
        sa.Column("visitor", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("day", "record_id", "visitor"),
    )
    op.create_table(
        "stats_salts",
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("salt", sa.LargeBinary(length=32), nullable=False),
        sa.PrimaryKeyConstraint("day"),
    )


def downgrade() -> None:
    op.drop_table("stats_salts")
    op.drop_table("stats_visitors")
    op.drop_index("ix_stats_daily_day", table_name="stats_daily")
    op.drop_table("stats_daily")
