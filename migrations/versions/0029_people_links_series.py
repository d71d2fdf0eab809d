"""Who made a record and what it belongs to (issue 49): structured creators, related
identifiers and a place in a series on records and on their versions and drafts, the series
themselves, the index of links between records, and a deleted record's series for OAI-PMH.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-10

New nullable columns and new tables only: every record keeps what it had (`autoren` stays its
statement of authors, `creators` null), and no release request's `public_hash` changes (the
new fields enter it only when they hold a value). The downgrade drops them, and with them
every structured creator, link and series (the `autoren` text stays).
"""

import sqlalchemy as sa
from alembic import op

import app.models

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

UTC_TIMESTAMP = app.models.UTCDateTime()


def _columns() -> list[sa.Column]:
    return [
        sa.Column("creators", sa.Text(), nullable=True),
        sa.Column("related_identifiers", sa.Text(), nullable=True),
        sa.Column("series_slug", sa.String(length=64), nullable=True),
        sa.Column("series_number", sa.String(length=64), nullable=True),
    ]


def upgrade() -> None:
    # ALTER TABLE ... ADD COLUMN on both databases: SQLite's batch mode would copy the table
    # and lose the triggers of file_records (migrations 0005, 0006).
    for table in ("file_records", "file_versions"):
        for column in _columns():
            op.add_column(table, column)
    op.create_index(
        "ix_file_records_series", "file_records", ["series_slug", "created_at", "id"]
    )
    op.add_column("oai_tombstones", sa.Column("series_slug", sa.String(length=64), nullable=True))
    op.create_table(
        "series",
        sa.Column("slug", sa.String(length=64), nullable=False),
        sa.Column("title", sa.String(length=255), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("created_at", UTC_TIMESTAMP, nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("slug"),
    )
    op.create_table(
        "record_relations",
        sa.Column("record_id", sa.Uuid(), nullable=False),
        sa.Column("relation_type", sa.String(length=32), nullable=False),
        sa.Column("target_id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(["record_id"], ["file_records.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("record_id", "relation_type", "target_id"),
    )
    op.create_index("ix_record_relations_target", "record_relations", ["target_id"])


def downgrade() -> None:
    op.drop_index("ix_record_relations_target", table_name="record_relations")
    op.drop_table("record_relations")
    op.drop_table("series")
    with op.batch_alter_table("oai_tombstones") as table:
        table.drop_column("series_slug")
    op.drop_index("ix_file_records_series", table_name="file_records")
    for table in ("file_versions", "file_records"):
        for column in reversed(_columns()):
            op.drop_column(table, column.name)
