"""Initial schema: users, API tokens and file records.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

import app.models

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("email", sa.String(length=255), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("password_hash", sa.String(length=255), nullable=False),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.Column("created_at", app.models.UTCDateTime(), nullable=False),
        sa.Column("updated_at", app.models.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("email"),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", app.models.UTCDateTime(), nullable=False),
        sa.Column("last_used_at", app.models.UTCDateTime(), nullable=True),
        sa.Column("expires_at", app.models.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_api_tokens_user_id", "api_tokens", ["user_id"])
    op.create_index("ix_api_tokens_expires_at", "api_tokens", ["expires_at"])
    op.create_table(
        "file_records",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("stored_path", sa.String(length=512), nullable=False),
        sa.Column("checksum_sha256", sa.String(length=64), nullable=False),
        sa.Column("original_name", sa.String(length=255), nullable=False),
        sa.Column("mime_type", sa.String(length=255), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("aktiv_id", sa.String(length=255), nullable=True),
        sa.Column("path", sa.String(length=255), nullable=True),
        sa.Column("reprotyp", sa.String(length=255), nullable=True),
        sa.Column("titel", sa.String(length=255), nullable=True),
        sa.Column("beschreibung", sa.Text(), nullable=True),
        sa.Column("autoren", sa.String(length=255), nullable=True),
        sa.Column("sachschlagwoerter", sa.String(length=255), nullable=True),
        sa.Column("org_themen", sa.String(length=255), nullable=True),
        sa.Column("sperrfrist", sa.Date(), nullable=True),
        sa.Column("reihenfolge", sa.Integer(), nullable=False),
        sa.Column("freigabe", sa.Boolean(), nullable=False),
        sa.Column("erstellt_von", sa.String(length=255), nullable=True),
        sa.Column("freigegeben_von", sa.String(length=255), nullable=True),
        sa.Column("created_at", app.models.UTCDateTime(), nullable=False),
        sa.Column("updated_at", app.models.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_file_records_created", "file_records", ["created_at", "id"])
    op.create_index(
        "ix_file_records_user_created", "file_records", ["user_id", "created_at", "id"]
    )
    op.create_index(
        "ix_file_records_freigabe_created", "file_records", ["freigabe", "created_at", "id"]
    )
    op.create_index(
        "ix_file_records_path",
        "file_records",
        ["path"],
        postgresql_ops={"path": "text_pattern_ops"},
    )
    op.create_index("ix_file_records_aktiv_id", "file_records", ["aktiv_id"])
    op.create_index("ix_file_records_reprotyp", "file_records", ["reprotyp"])


def downgrade():
    op.drop_table("file_records")
    op.drop_table("api_tokens")
    op.drop_table("users")
