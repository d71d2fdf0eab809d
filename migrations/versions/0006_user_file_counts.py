"""Record counts per owner, kept by triggers: the exact total of a user's own list.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

BACKFILL = """
INSERT INTO user_file_counts (user_id, n)
SELECT user_id, count(*) FROM file_records GROUP BY user_id
"""

# As for file_path_counts (0005): row triggers for inserts, deletes and a change of owner,
# two rows locked in key order, and TRUNCATE resets the counts on PostgreSQL.
POSTGRES_UP = [
    """
    CREATE FUNCTION user_file_counts_add(u integer, d bigint) RETURNS void
    LANGUAGE sql AS $$
        INSERT INTO user_file_counts AS c (user_id, n) VALUES (u, d)
        ON CONFLICT (user_id) DO UPDATE SET n = c.n + excluded.n
    $$
    """,
    """
    CREATE FUNCTION user_file_counts_track() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            PERFORM user_file_counts_add(NEW.user_id, 1);
        ELSIF TG_OP = 'DELETE' THEN
            PERFORM user_file_counts_add(OLD.user_id, -1);
        ELSIF OLD.user_id < NEW.user_id THEN
            PERFORM user_file_counts_add(OLD.user_id, -1);
            PERFORM user_file_counts_add(NEW.user_id, 1);
        ELSIF OLD.user_id > NEW.user_id THEN
            PERFORM user_file_counts_add(NEW.user_id, 1);
            PERFORM user_file_counts_add(OLD.user_id, -1);
        END IF;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE FUNCTION user_file_counts_reset() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        -- DELETE, not TRUNCATE: a TRUNCATE ... CASCADE from users may be truncating this
        -- table in the same statement.
        DELETE FROM user_file_counts;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER user_file_counts_track
    AFTER INSERT OR DELETE OR UPDATE OF user_id ON file_records
    FOR EACH ROW EXECUTE FUNCTION user_file_counts_track()
    """,
    """
    CREATE TRIGGER user_file_counts_reset
    AFTER TRUNCATE ON file_records
    FOR EACH STATEMENT EXECUTE FUNCTION user_file_counts_reset()
    """,
]
POSTGRES_DOWN = [
    "DROP TRIGGER user_file_counts_reset ON file_records",
    "DROP TRIGGER user_file_counts_track ON file_records",
    "DROP FUNCTION user_file_counts_reset()",
    "DROP FUNCTION user_file_counts_track()",
    "DROP FUNCTION user_file_counts_add(integer, bigint)",
]
SQLITE_UP = [
    """
    CREATE TRIGGER user_file_counts_insert AFTER INSERT ON file_records
    BEGIN
        INSERT INTO user_file_counts (user_id, n) VALUES (NEW.user_id, 1)
        ON CONFLICT (user_id) DO UPDATE SET n = n + 1;
    END
    """,
    """
    CREATE TRIGGER user_file_counts_delete AFTER DELETE ON file_records
    BEGIN
        UPDATE user_file_counts SET n = n - 1 WHERE user_id = OLD.user_id;
    END
    """,
    """
    CREATE TRIGGER user_file_counts_update AFTER UPDATE OF user_id ON file_records
    WHEN OLD.user_id IS NOT NEW.user_id
    BEGIN
        UPDATE user_file_counts SET n = n - 1 WHERE user_id = OLD.user_id;
        INSERT INTO user_file_counts (user_id, n) VALUES (NEW.user_id, 1)
        ON CONFLICT (user_id) DO UPDATE SET n = n + 1;
    END
    """,
]
SQLITE_DOWN = [
    "DROP TRIGGER user_file_counts_update",
    "DROP TRIGGER user_file_counts_delete",
    "DROP TRIGGER user_file_counts_insert",
]


def upgrade():
    op.create_table(
        "user_file_counts",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("user_id"),
    )
    postgres = op.get_bind().dialect.name == "postgresql"
    for statement in POSTGRES_UP if postgres else SQLITE_UP:
        op.execute(statement)
    op.execute(BACKFILL)


def downgrade():
    postgres = op.get_bind().dialect.name == "postgresql"
    for statement in POSTGRES_DOWN if postgres else SQLITE_DOWN:
        op.execute(statement)
    op.drop_table("user_file_counts")
