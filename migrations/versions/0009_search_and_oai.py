"""Full-text search, OAI-PMH tombstones (issue 13).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23
"""

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
