"""A picture for every release (issue 50): `covers`, a record's pictures and the outbox of
those still to make.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-02

Existing records get their covers from `flask covers make`, which writes the rows this
migration does not. On PostgreSQL a change of `covers` notifies the record cache's channel, as
one of `file_records` does (migration 0008): the cache keeps the cover a record shows.
"""

import sqlalchemy as sa
from alembic import op

import app.models

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

UTC_TIMESTAMP = app.models.UTCDateTime()


def upgrade() -> None:
    op.create_table(
        "covers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("record_id", sa.Uuid(), nullable=False),
        sa.Column("origin", sa.String(length=16), nullable=False),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("source_path", sa.String(length=512), nullable=False),
        sa.Column("source_type", sa.String(length=255), nullable=False),
        sa.Column("key", sa.String(length=512), nullable=True),
        sa.Column("width", sa.Integer(), nullable=True),
        sa.Column("height", sa.Integer(), nullable=True),
        sa.Column("objects", sa.Text(), nullable=True),
        sa.Column("created_at", UTC_TIMESTAMP, nullable=False),
        sa.Column("made_at", UTC_TIMESTAMP, nullable=True),
        sa.Column("due_at", UTC_TIMESTAMP, nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_covers_source", "covers", ["record_id", "origin", "source"], unique=True)
    op.create_index("ix_covers_due", "covers", ["due_at"])
    op.create_index("ix_covers_key", "covers", ["key"])
    op.create_index("ix_covers_source_path", "covers", ["source_path"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            """
            CREATE TRIGGER covers_changes
            AFTER UPDATE OR DELETE OR TRUNCATE ON covers
            FOR EACH STATEMENT EXECUTE FUNCTION record_changes_notify()
            """
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER covers_changes ON covers")
    op.drop_table("covers")
