"""Resumable uploads (issue 14).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23
"""

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
