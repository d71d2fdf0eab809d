"""Announce changes to file records on the `record_changes` channel (PostgreSQL).

Each app process keeps the records it has read for `GET /api/files/{id}` and the downloads
(app/cache.py) and empties that cache when a notification arrives. This statement trigger
sends one whenever records are updated, deleted or truncated, by whatever client; new records
need none, as nothing can have kept them. PostgreSQL sends the notification when the
transaction commits, and only then. SQLite has no notifications; the app does not cache
records there.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-21
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

POSTGRES_UP = [
    """
    CREATE FUNCTION record_changes_notify() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('record_changes', TG_TABLE_NAME);
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER file_records_changes
    AFTER UPDATE OR DELETE OR TRUNCATE ON file_records
    FOR EACH STATEMENT EXECUTE FUNCTION record_changes_notify()
    """,
]
POSTGRES_DOWN = [
    "DROP TRIGGER file_records_changes ON file_records",
    "DROP FUNCTION record_changes_notify()",
]


def upgrade():
    if op.get_bind().dialect.name == "postgresql":
        for statement in POSTGRES_UP:
            op.execute(statement)


def downgrade():
    if op.get_bind().dialect.name == "postgresql":
        for statement in POSTGRES_DOWN:
            op.execute(statement)
