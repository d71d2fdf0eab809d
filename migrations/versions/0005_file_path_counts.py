"""Record counts per path and release state, kept by triggers; folder-ordered path index.

Lists take their exact ``total`` from ``file_path_counts`` (a few rows per folder) instead of
counting every matching record, and a path-prefix list reads each matching folder newest
first from ``ix_file_records_path`` (path, freigabe, created_at, id).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

BACKFILL = """
INSERT INTO file_path_counts (path, freigabe, n)
SELECT coalesce(path, ''), freigabe, count(*) FROM file_records
GROUP BY coalesce(path, ''), freigabe
"""

# PostgreSQL: one row trigger for inserts, deletes and changes of path or release state, and
# a statement trigger for TRUNCATE. A change moves one count to another; the two rows are
# locked in key order, so two opposite moves cannot deadlock.
POSTGRES_UP = [
    """
    CREATE FUNCTION file_path_counts_add(p text, f boolean, d bigint) RETURNS void
    LANGUAGE sql AS $$
        INSERT INTO file_path_counts AS c (path, freigabe, n) VALUES (p, f, d)
        ON CONFLICT (path, freigabe) DO UPDATE SET n = c.n + excluded.n
    $$
    """,
    """
    CREATE FUNCTION file_path_counts_track() RETURNS trigger
    LANGUAGE plpgsql AS $$
    DECLARE
        old_key text;
        new_key text;
    BEGIN
        IF TG_OP = 'INSERT' THEN
            PERFORM file_path_counts_add(coalesce(NEW.path, ''), NEW.freigabe, 1);
        ELSIF TG_OP = 'DELETE' THEN
            PERFORM file_path_counts_add(coalesce(OLD.path, ''), OLD.freigabe, -1);
        ELSE
            old_key := coalesce(OLD.path, '');
            new_key := coalesce(NEW.path, '');
            IF (old_key, OLD.freigabe) = (new_key, NEW.freigabe) THEN
                RETURN NULL;
            ELSIF (old_key, OLD.freigabe) < (new_key, NEW.freigabe) THEN
                PERFORM file_path_counts_add(old_key, OLD.freigabe, -1);
                PERFORM file_path_counts_add(new_key, NEW.freigabe, 1);
            ELSE
                PERFORM file_path_counts_add(new_key, NEW.freigabe, 1);
                PERFORM file_path_counts_add(old_key, OLD.freigabe, -1);
            END IF;
        END IF;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE FUNCTION file_path_counts_reset() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        TRUNCATE file_path_counts;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER file_path_counts_track
    AFTER INSERT OR DELETE OR UPDATE OF path, freigabe ON file_records
    FOR EACH ROW EXECUTE FUNCTION file_path_counts_track()
    """,
    """
    CREATE TRIGGER file_path_counts_reset
    AFTER TRUNCATE ON file_records
    FOR EACH STATEMENT EXECUTE FUNCTION file_path_counts_reset()
    """,
]
POSTGRES_DOWN = [
    "DROP TRIGGER file_path_counts_reset ON file_records",
    "DROP TRIGGER file_path_counts_track ON file_records",
    "DROP FUNCTION file_path_counts_reset()",
    "DROP FUNCTION file_path_counts_track()",
    "DROP FUNCTION file_path_counts_add(text, boolean, bigint)",
]

# SQLite has no TRUNCATE (a DELETE without WHERE fires the delete trigger per row).
SQLITE_UP = [
    """
    CREATE TRIGGER file_path_counts_insert AFTER INSERT ON file_records
    BEGIN
        INSERT INTO file_path_counts (path, freigabe, n)
        VALUES (coalesce(NEW.path, ''), NEW.freigabe, 1)
        ON CONFLICT (path, freigabe) DO UPDATE SET n = n + 1;
    END
    """,
    """
    CREATE TRIGGER file_path_counts_delete AFTER DELETE ON file_records
    BEGIN
        UPDATE file_path_counts SET n = n - 1
        WHERE path = coalesce(OLD.path, '') AND freigabe = OLD.freigabe;
    END
    """,
    """
    CREATE TRIGGER file_path_counts_update AFTER UPDATE OF path, freigabe ON file_records
    WHEN coalesce(OLD.path, '') IS NOT coalesce(NEW.path, '') OR OLD.freigabe IS NOT NEW.freigabe
    BEGIN
        UPDATE file_path_counts SET n = n - 1
        WHERE path = coalesce(OLD.path, '') AND freigabe = OLD.freigabe;
        INSERT INTO file_path_counts (path, freigabe, n)
        VALUES (coalesce(NEW.path, ''), NEW.freigabe, 1)
        ON CONFLICT (path, freigabe) DO UPDATE SET n = n + 1;
    END
    """,
]
SQLITE_DOWN = [
    "DROP TRIGGER file_path_counts_update",
    "DROP TRIGGER file_path_counts_delete",
    "DROP TRIGGER file_path_counts_insert",
]


def upgrade():
    op.drop_index("ix_file_records_path", table_name="file_records")
    op.create_index(
        "ix_file_records_path",
        "file_records",
        ["path", "freigabe", "created_at", "id"],
        postgresql_ops={"path": "text_pattern_ops"},
    )
    op.create_table(
        "file_path_counts",
        sa.Column("path", sa.String(length=255), nullable=False),
        sa.Column("freigabe", sa.Boolean(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("path", "freigabe"),
    )
    op.create_index(
        "ix_file_path_counts_path",
        "file_path_counts",
        ["path"],
        postgresql_ops={"path": "text_pattern_ops"},
    )
    postgres = op.get_bind().dialect.name == "postgresql"
    for statement in POSTGRES_UP if postgres else SQLITE_UP:
        op.execute(statement)
    op.execute(BACKFILL)


def downgrade():
    postgres = op.get_bind().dialect.name == "postgresql"
    for statement in POSTGRES_DOWN if postgres else SQLITE_DOWN:
        op.execute(statement)
    op.drop_index("ix_file_path_counts_path", table_name="file_path_counts")
    op.drop_table("file_path_counts")
    op.drop_index("ix_file_records_path", table_name="file_records")
    op.create_index(
        "ix_file_records_path",
        "file_records",
        ["path"],
        postgresql_ops={"path": "text_pattern_ops"},
    )
