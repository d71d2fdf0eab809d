"""One record per stored object, and a fast lookup from object key to record.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index("ix_file_records_stored_path", "file_records", ["stored_path"], unique=True)


def downgrade():
    op.drop_index("ix_file_records_stored_path", table_name="file_records")
