"""The migrations build exactly the schema the models describe, on an empty PostgreSQL."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from app.extensions import db
from app.search.index import SCHEMA_NAMES
from tests.conftest import migrate_database

pytestmark = pytest.mark.postgres


def not_search_object(name, _type, _parent) -> bool:
    """The search index is not a model on purpose (app/search/index.py)."""
    return name not in SCHEMA_NAMES


def test_migrations_on_an_empty_postgres_match_the_models(make_postgres_database, tmp_path: Path):
    url = make_postgres_database()
    migrate_database(url, tmp_path)
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            diff = compare_metadata(
                MigrationContext.configure(
                    conn, opts={"compare_type": True, "include_name": not_search_object}
                ),
                db.metadata,
            )
            assert diff == []
            inspector = sa.inspect(conn)
            indexed = {
                tuple(index["column_names"]) for index in inspector.get_indexes("file_records")
            }
            assert {
                ("user_id", "created_at", "id"),
                ("created_at", "id"),
                ("freigabe", "created_at", "id"),
                ("path", "freigabe", "created_at", "id"),
                ("aktiv_id",),
                ("reprotyp",),
            } <= indexed
            path_index = next(
                i
                for i in inspector.get_indexes("file_records")
                if i["name"] == "ix_file_records_path"
            )
            assert path_index["dialect_options"].get("postgresql_ops") == {
                "path": "text_pattern_ops"
            }
    finally:
        engine.dispose()


def test_migrations_on_sqlite_match_the_models(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'fresh.sqlite3'}"
    migrate_database(url, tmp_path)
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"include_name": not_search_object})
            assert compare_metadata(context, db.metadata) == []
    finally:
        engine.dispose()


def _citation_table(url: str) -> tuple[set[str], list[str] | None]:
    """The columns of `record_citations` and, on PostgreSQL, its storage options."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            columns = {
                column["name"] for column in sa.inspect(conn).get_columns("record_citations")
            }
            options = None
            if conn.dialect.name == "postgresql":
                options = conn.execute(
                    sa.text("SELECT reloptions FROM pg_class WHERE relname = 'record_citations'")
                ).scalar_one()
            return columns, options
    finally:
        engine.dispose()


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_migration_0021_drops_the_kept_pages_and_its_downgrade_brings_them_back(
    dialect: str, make_postgres_database, tmp_path: Path
):
    from flask_migrate import downgrade, upgrade

    from app import create_app
    from tests.conftest import base_config

    if dialect == "sqlite":
        url = f"sqlite:///{tmp_path / 'fresh.sqlite3'}"
    else:
        url = make_postgres_database()
    app = create_app(
        base_config(SQLALCHEMY_DATABASE_URI=url, STORAGE_LOCAL_ROOT=str(tmp_path / "unused"))
    )
    pages = {"page_key", "page_de", "page_en"}

    def assert_pages_kept() -> None:
        columns, options = _citation_table(url)
        assert pages <= columns
        if dialect == "postgresql":
            assert options == ["toast_tuple_target=8160"]

    with app.app_context():
        upgrade(revision="0020")
        db.engine.dispose()
    assert_pages_kept()
    with app.app_context():
        upgrade(revision="0021")
        db.engine.dispose()
    columns, options = _citation_table(url)
    assert columns == {"record_id", "key", "de", "en"} and options is None
    with app.app_context():
        downgrade(revision="0020")
        db.engine.dispose()
    assert_pages_kept()


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_migration_0022_adds_versions_and_keeps_the_count_triggers(
    dialect: str, make_postgres_database, tmp_path: Path
):
    """Issue 39: records start at version 1; whether their content has been public is read
    from the record as it is; the triggers of migrations 0005/0006 survive both ways."""
    from flask_migrate import downgrade, upgrade

    from app import create_app
    from tests.conftest import base_config

    if dialect == "sqlite":
        url = f"sqlite:///{tmp_path / 'fresh.sqlite3'}"
    else:
        url = make_postgres_database()
    app = create_app(
        base_config(SQLALCHEMY_DATABASE_URI=url, STORAGE_LOCAL_ROOT=str(tmp_path / "unused"))
    )
    insert = sa.text(
        "INSERT INTO file_records (id, user_id, stored_path, checksum_sha256, original_name, "
        "mime_type, size, reihenfolge, freigabe, sperrfrist, created_at, updated_at) VALUES "
        "(:id, 1, :key, :sha, 'a.txt', 'text/plain', 1, 0, :freigabe, :sperrfrist, "
        "'2026-01-01 00:00:00', '2026-01-01 00:00:00')"
    )

    def add_record(record_id: str, freigabe: bool, sperrfrist: str | None) -> None:
        db.session.execute(
            insert,
            {
                "id": record_id if dialect == "postgresql" else record_id.replace("-", ""),
                "key": f"files/{record_id}",
                "sha": "0" * 64,
                "freigabe": freigabe,
                "sperrfrist": sperrfrist,
            },
        )

    def user_count() -> int:
        return db.session.execute(sa.text("SELECT n FROM user_file_counts")).scalar_one()

    public, hidden, embargoed = (
        "00000000-0000-4000-8000-000000000001",
        "00000000-0000-4000-8000-000000000002",
        "00000000-0000-4000-8000-000000000003",
    )
    with app.app_context():
        upgrade(revision="0021")
        db.session.execute(
            sa.text(
                "INSERT INTO users (id, email, name, password_hash, is_admin, is_active, "
                "created_at, updated_at) VALUES (1, 'a@example.org', 'a', 'x', false, true, "
                "'2026-01-01 00:00:00', '2026-01-01 00:00:00')"
            )
        )
        add_record(public, True, None)
        add_record(hidden, False, None)
        add_record(embargoed, True, "2999-01-01")
        db.session.commit()
        upgrade(revision="0022")
        rows = db.session.execute(
            sa.text("SELECT version, content_was_public FROM file_records ORDER BY id")
        ).all()
        assert [(version, bool(was_public)) for version, was_public in rows] == [
            (1, True),
            (1, False),
            (1, False),
        ]
        assert db.session.execute(sa.text("SELECT count(*) FROM file_versions")).scalar() == 0
        add_record("00000000-0000-4000-8000-000000000004", True, None)
        db.session.commit()
        assert user_count() == 4  # the trigger still counts
        db.session.commit()
        downgrade(revision="0021")
        columns = {c["name"] for c in sa.inspect(db.engine).get_columns("file_records")}
        assert not {"version", "content_was_public"} & columns
        assert "file_versions" not in sa.inspect(db.engine).get_table_names()
        add_record("00000000-0000-4000-8000-000000000005", True, None)
        db.session.commit()
        assert user_count() == 5
        db.session.remove()  # the session's connection goes back before the pool is closed
        db.engine.dispose()


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_migration_0023_adds_release_approval_and_its_downgrade_removes_it(
    dialect: str, make_postgres_database, tmp_path: Path
):
    """Existing accounts become no approvers; a second pending request of a record is refused
    by the database; the downgrade leaves the tables as 0022 had them."""
    from flask_migrate import downgrade, upgrade

    from app import create_app
    from tests.conftest import base_config

    url = f"sqlite:///{tmp_path / 'fresh.sqlite3'}" if dialect == "sqlite" else None
    url = url or make_postgres_database()
    app = create_app(
        base_config(SQLALCHEMY_DATABASE_URI=url, STORAGE_LOCAL_ROOT=str(tmp_path / "unused"))
    )
    added = {"release_requests", "release_editors", "mail_outbox"}

    def tables_and_user_columns() -> tuple[set[str], set[str]]:
        engine = sa.create_engine(url)
        try:
            with engine.connect() as conn:
                inspector = sa.inspect(conn)
                users = {column["name"] for column in inspector.get_columns("users")}
                return set(inspector.get_table_names()), users
        finally:
            engine.dispose()

    with app.app_context():
        upgrade(revision="0022")
        db.session.execute(
            sa.text(
                "INSERT INTO users (email, name, password_hash, is_admin, is_active, created_at,"
                " updated_at) VALUES ('a@example.org', 'A', 'x', false, true, :now, :now)"
            ),
            {"now": "2026-11-01 00:00:00"},
        )
        db.session.commit()
        upgrade(revision="0023")
        assert db.session.execute(sa.text("SELECT is_approver FROM users")).scalar_one() in (
            False,
            0,
        )
        pending = sa.text(
            "INSERT INTO release_requests (id, record_id, kind, state, content_sha256,"
            " public_hash, submitted_at, override) VALUES (:id, :record, 'release', 'pending',"
            " 'c', 'p', :now, false)"
        ).bindparams(sa.bindparam("id", type_=sa.Uuid), sa.bindparam("record", type_=sa.Uuid))
        record = uuid.uuid4()
        db.session.execute(pending, {"id": uuid.uuid4(), "record": record, "now": "2026-11-01"})
        db.session.commit()
        with pytest.raises(sa.exc.IntegrityError):
            db.session.execute(pending, {"id": uuid.uuid4(), "record": record, "now": "2026-11-01"})
            db.session.commit()
        db.session.rollback()
        db.engine.dispose()
    tables, users = tables_and_user_columns()
    assert added <= tables and "is_approver" in users
    with app.app_context():
        downgrade(revision="0022")
        db.engine.dispose()
    tables, users = tables_and_user_columns()
    assert not added & tables and "is_approver" not in users


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_migration_0027_moves_a_waiting_change_into_a_draft_and_back(
    dialect: str, make_postgres_database, tmp_path: Path
):
    """A change waiting on its request (0025's columns) becomes its record's draft: the
    record's public fields with the wanted ones over them, and the waiting content; the
    downgrade puts it back on the request."""
    from flask_migrate import downgrade, upgrade

    from app import create_app
    from tests.conftest import base_config

    url = f"sqlite:///{tmp_path / 'fresh.sqlite3'}" if dialect == "sqlite" else None
    url = url or make_postgres_database()
    app = create_app(
        base_config(SQLALCHEMY_DATABASE_URI=url, STORAGE_LOCAL_ROOT=str(tmp_path / "unused"))
    )
    record, request = uuid.uuid4(), uuid.uuid4()
    ids = (sa.bindparam("record", type_=sa.Uuid), sa.bindparam("request", type_=sa.Uuid))
    with app.app_context():
        upgrade(revision="0026")
        db.session.execute(
            sa.text(
                "INSERT INTO users (id, email, name, password_hash, is_admin, is_active,"
                " created_at, updated_at) VALUES (1, 'a@example.org', 'A', 'x', false, true,"
                " :now, :now)"
            ),
            {"now": "2026-11-01 00:00:00"},
        )
        db.session.execute(
            sa.text(
                "INSERT INTO file_records (id, user_id, stored_path, checksum_sha256,"
                " original_name, mime_type, size, titel, autoren, reihenfolge, freigabe,"
                " created_at, updated_at, version, content_was_public) VALUES (:record, 1,"
                " 'files/r/v1', 'sha-v1', 'v1.pdf', 'application/pdf', 10, 'Alt', 'Muster',"
                " 3, true, :now, :now, 1, true)"
            ).bindparams(ids[0]),
            {"record": record, "now": "2026-11-01 00:00:00"},
        )
        db.session.execute(
            sa.text(
                "INSERT INTO release_requests (id, record_id, kind, state, content_sha256,"
                " public_hash, submitted_at, override, pending_fields, pending_stored_path,"
                " pending_size, pending_mime_type, pending_original_name, pending_change_note)"
                " VALUES (:request, :record, 'change', 'pending', 'sha-v2', 'p', :now, false,"
                ' \'{"sperrfrist": "2027-01-01", "titel": "Neu"}\', \'files/r/v2\', 20,'
                " 'application/pdf', 'v2.pdf', 'Tabelle 3')"
            ).bindparams(*ids),
            {"record": record, "request": request, "now": "2026-11-01 00:00:00"},
        )
        db.session.commit()
        upgrade(revision="0027")
        draft = db.session.execute(
            sa.text(
                "SELECT number, state, stored_path, checksum_sha256, size, original_name,"
                " change_note, titel, autoren, reihenfolge, sperrfrist FROM file_versions"
            )
        ).one()
        assert tuple(draft)[:10] == (
            0,
            "draft",
            "files/r/v2",
            "sha-v2",
            20,
            "v2.pdf",
            "Tabelle 3",
            "Neu",
            "Muster",
            3,
        )
        assert str(draft.sperrfrist) == "2027-01-01"
        db.session.commit()
        downgrade(revision="0026")
        back = db.session.execute(
            sa.text(
                "SELECT pending_fields, pending_stored_path, pending_size, pending_original_name,"
                " pending_change_note FROM release_requests"
            )
        ).one()
        assert json.loads(back.pending_fields) == {"sperrfrist": "2027-01-01", "titel": "Neu"}
        assert tuple(back)[1:] == ("files/r/v2", 20, "v2.pdf", "Tabelle 3")
        assert db.session.execute(sa.text("SELECT count(*) FROM file_versions")).scalar() == 0
        db.session.commit()
        db.engine.dispose()


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_migration_0029_adds_issue_49s_fields_and_keeps_hashes_and_triggers(
    dialect: str, make_postgres_database, tmp_path: Path
):
    """Issue 49: records keep what they had (no structured creators, no links, no series), a
    release request bound before the upgrade stays bound (its `public_hash` is the same), the
    count triggers survive both ways, and the downgrade removes what it added."""
    import hashlib
    import json

    from flask_migrate import downgrade, upgrade

    from app import create_app
    from app.files.approval import public_hash
    from tests.conftest import base_config

    url = f"sqlite:///{tmp_path / 'fresh.sqlite3'}" if dialect == "sqlite" else None
    url = url or make_postgres_database()
    app = create_app(
        base_config(SQLALCHEMY_DATABASE_URI=url, STORAGE_LOCAL_ROOT=str(tmp_path / "unused"))
    )
    record_id = uuid.UUID("00000000-0000-4000-8000-000000000049")
    insert = sa.text(
        "INSERT INTO file_records (id, user_id, stored_path, checksum_sha256, original_name, "
        "mime_type, size, reihenfolge, freigabe, titel, autoren, created_at, updated_at, "
        "version, content_was_public) VALUES (:id, 1, :key, :sha, 'a.pdf', 'application/pdf', "
        "1, 0, true, 'Bericht', 'Muster, Erika', '2026-01-01 00:00:00', "
        "'2026-01-01 00:00:00', 1, false)"
    ).bindparams(sa.bindparam("id", type_=sa.Uuid))
    hashed = ("original_name", "mime_type", "aktiv_id", "path", "reprotyp", "titel")
    hashed += ("beschreibung", "autoren", "sachschlagwoerter", "org_themen", "sperrfrist")
    before = {name: None for name in hashed} | {"reihenfolge": 0}
    before |= {"original_name": "a.pdf", "mime_type": "application/pdf", "titel": "Bericht"}
    before["autoren"] = "Muster, Erika"
    text = json.dumps(before, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    old_hash = hashlib.sha256(text.encode()).hexdigest()

    def columns(table: str) -> set[str]:
        return {column["name"] for column in sa.inspect(db.engine).get_columns(table)}

    def count() -> int:
        return db.session.execute(sa.text("SELECT n FROM user_file_counts")).scalar_one()

    with app.app_context():
        upgrade(revision="0027")
        db.session.execute(
            sa.text(
                "INSERT INTO users (id, email, name, password_hash, is_admin, is_active, "
                "is_approver, created_at, updated_at) VALUES (1, 'a@example.org', 'a', 'x', "
                "false, true, false, '2026-01-01 00:00:00', '2026-01-01 00:00:00')"
            )
        )
        db.session.execute(insert, {"id": record_id, "key": "files/a", "sha": "0" * 64})
        db.session.commit()
        upgrade(revision="0029")
        added = {"creators", "related_identifiers", "series_slug", "series_number"}
        assert added <= columns("file_records") and added <= columns("file_versions")
        assert {"series", "record_relations"} <= set(sa.inspect(db.engine).get_table_names())
        row = (
            db.session.execute(sa.select(sa.text("*")).select_from(sa.table("file_records")))
            .mappings()
            .one()
        )
        assert [row[name] for name in sorted(added)] == [None] * 4
        assert public_hash(SimpleNamespace(**row)) == old_hash
        db.session.execute(insert, {"id": uuid.uuid4(), "key": "files/b", "sha": "1" * 64})
        db.session.commit()
        assert count() == 2  # the trigger still counts
        downgrade(revision="0027")
        assert not added & columns("file_records") and not added & columns("file_versions")
        assert "series" not in sa.inspect(db.engine).get_table_names()
        assert "series_slug" not in columns("oai_tombstones")
        db.session.execute(insert, {"id": uuid.uuid4(), "key": "files/c", "sha": "2" * 64})
        db.session.commit()
        assert count() == 3
        db.session.remove()
        db.engine.dispose()
