"""Announce changes that can end a token on the `auth_changes` channel (PostgreSQL).

Each app process keeps the tokens it has checked (app/cache.py) and empties that cache
when a notification arrives. These statement triggers send one whenever a token is deleted or
its secret, lifetime or owner changes, and whenever an account's active flag or role changes
or an account is deleted, by whatever client. A token's last use (`last_used_at`) is not such
a change. PostgreSQL sends the notification when the transaction commits, and only then.
SQLite has no notifications; the app does not cache tokens there.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-21
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

POSTGRES_UP = [
    """
    CREATE FUNCTION auth_changes_notify() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('auth_changes', TG_TABLE_NAME);
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER api_tokens_auth_changes
    AFTER DELETE OR TRUNCATE OR UPDATE OF token_hash, expires_at, user_id ON api_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION auth_changes_notify()
    """,
    """
    CREATE TRIGGER users_auth_changes
    AFTER DELETE OR TRUNCATE OR UPDATE OF is_active, is_admin ON users
    FOR EACH STATEMENT EXECUTE FUNCTION auth_changes_notify()
    """,
]
POSTGRES_DOWN = [
    "DROP TRIGGER users_auth_changes ON users",
    "DROP TRIGGER api_tokens_auth_changes ON api_tokens",
    "DROP FUNCTION auth_changes_notify()",
]


def upgrade():
    if op.get_bind().dialect.name == "postgresql":
        for statement in POSTGRES_UP:
            op.execute(statement)


def downgrade():
    if op.get_bind().dialect.name == "postgresql":
        for statement in POSTGRES_DOWN:
            op.execute(statement)
