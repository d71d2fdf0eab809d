"""Versions (issue 39): a record's version number, whether its current content has been public,
and one row per version a replacement ended, with its kept content's key if it was kept.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28

Existing records start at version 1. Whether their content has been public is not known for
the past; it is taken from the record as it is now (released, embargo over on the day of the
upgrade, UTC), so that a record public today keeps its current content when it is replaced
with KEEP_RELEASED_VERSIONS on.
"""

import sqlalchemy as sa
from alembic import op

import app.models

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ALTER TABLE on both backends: batch mode would rebuild the table on SQLite and
    # lose the triggers that keep the counts (migrations 0005, 0006).
    op.add_column(
        "file_records",
        sa.Column("version", sa.Integer(), server_default=sa.text("1"), nullable=False),
    )
    op.add_column(
        "file_records",
        sa.Column(
            "content_was_public", sa.Boolean(), server_default=sa.text("false"), nullable=False
        ),
    )
    op.execute(
        sa.text(
            "UPDATE file_records SET content_was_public = true WHERE freigabe = true "
            "AND (sperrfrist IS NULL OR sperrfrist <= CURRENT_DATE)"
        )
    )
    op.create_table(
        "file_versions",
        sa.Column("record_id", sa.Uuid(), nullable=False),
        sa.Column("number", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("checksum_sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("mime_type", sa.String(length=255), nullable=False),
        sa.Column("original_name", sa.String(length=255), nullable=False),
        sa.Column("replaced_at", app.models.UTCDateTime(), nullable=False),
        sa.Column("replaced_by", sa.Integer(), nullable=True),
        sa.Column("change_note", sa.Text(), nullable=True),
        sa.Column("stored_path", sa.String(length=512), nullable=True),
        sa.ForeignKeyConstraint(["record_id"], ["file_records.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("record_id", "number"),
    )
    op.create_index(
        "ix_file_versions_stored_path", "file_versions", ["stored_path"], unique=True
    )


def downgrade() -> None:
    """Kept contents lose their rows: `flask storage reconcile` then reports them as orphans
    (and removes them with --fix)."""
    op.drop_index("ix_file_versions_stored_path", table_name="file_versions")
    op.drop_table("file_versions")
    op.execute("ALTER TABLE file_records DROP COLUMN content_was_public")
    op.execute("ALTER TABLE file_records DROP COLUMN version")
