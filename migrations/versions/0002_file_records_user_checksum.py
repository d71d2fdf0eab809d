"""Index file records by owner and content checksum, for the bulk import's duplicate check.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-28
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index(
        "ix_file_records_user_checksum", "file_records", ["user_id", "checksum_sha256"]
    )


def downgrade():
    op.drop_index("ix_file_records_user_checksum", table_name="file_records")
