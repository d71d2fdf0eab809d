"""`file_path_counts` forgets a path whose count reaches zero (issue 21).

Every move of a record to a new path used to leave the old path's row behind at zero: one
user PATCHing paths could grow the table without bound, and every read of it (list totals,
OAI-PMH ListSets) would step over the dead rows. The triggers now delete a row in the same
statement that brings it to zero; rows already at zero go here.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# PostgreSQL: the row is locked by the update, so deleting it at zero cannot race another
# transaction's change of the same count (that one waits, then inserts the row anew).
POSTGRES_ADD = """
CREATE OR REPLACE FUNCTION file_path_counts_add(p text, f boolean, d bigint) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO file_path_counts AS c (path, freigabe, n) VALUES (p, f, d)
    ON CONFLICT (path, freigabe) DO UPDATE SET n = c.n + excluded.n;
    DELETE FROM file_path_counts WHERE path = p AND freigabe = f AND n = 0;
$$
"""
POSTGRES_ADD_BEFORE = """
CREATE OR REPLACE FUNCTION file_path_counts_add(p text, f boolean, d bigint) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO file_path_counts AS c (path, freigabe, n) VALUES (p, f, d)
    ON CONFLICT (path, freigabe) DO UPDATE SET n = c.n + excluded.n
$$
"""

SQLITE_DECREMENT = """
        UPDATE file_path_counts SET n = n - 1
        WHERE path = coalesce(OLD.path, '') AND freigabe = OLD.freigabe;"""
SQLITE_FORGET = """
        DELETE FROM file_path_counts
        WHERE path = coalesce(OLD.path, '') AND freigabe = OLD.freigabe AND n = 0;"""
SQLITE_INCREMENT = """
        INSERT INTO file_path_counts (path, freigabe, n)
        VALUES (coalesce(NEW.path, ''), NEW.freigabe, 1)
        ON CONFLICT (path, freigabe) DO UPDATE SET n = n + 1;"""


def _sqlite_triggers(forget: str) -> list[str]:
    return [
        f"""
        CREATE TRIGGER file_path_counts_delete AFTER DELETE ON file_records
        BEGIN{SQLITE_DECREMENT}{forget}
        END
        """,
        f"""
        CREATE TRIGGER file_path_counts_update AFTER UPDATE OF path, freigabe ON file_records
        WHEN coalesce(OLD.path, '') IS NOT coalesce(NEW.path, '')
            OR OLD.freigabe IS NOT NEW.freigabe
        BEGIN{SQLITE_DECREMENT}{forget}{SQLITE_INCREMENT}
        END
        """,
    ]


def _replace_sqlite_triggers(forget: str) -> None:
    op.execute("DROP TRIGGER file_path_counts_update")
    op.execute("DROP TRIGGER file_path_counts_delete")
    for statement in _sqlite_triggers(forget):
        op.execute(statement)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(POSTGRES_ADD)
    else:
        _replace_sqlite_triggers(SQLITE_FORGET)
    op.execute("DELETE FROM file_path_counts WHERE n = 0")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(POSTGRES_ADD_BEFORE)
    else:
        _replace_sqlite_triggers("")
