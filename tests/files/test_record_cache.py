"""Records read for `GET /api/files/{id}` and the downloads are remembered per process on
PostgreSQL, shown only to whoever may see them, and forgotten whenever they change.

Two apps on one database stand for two server processes ("replicas"). A change must reach
both: at once in the process that made it, and through the database's notification in the
other, whoever made it (a request, SQL by hand).
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask

from app.cache import RECORDS, TOKENS
from app.extensions import db
from app.models import FileRecord
from tests.support import samples
from tests.support.api import Account, Api
from tests.support.replicas import Replicas, wait_for

pytestmark = pytest.mark.postgres


def record_reads(app: Flask) -> list[str]:
    """Collects the statements `app` sends that read file_records."""
    seen: list[str] = []
    with app.app_context():
        engine = db.engine

    @sa.event.listens_for(engine, "before_cursor_execute")
    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "FROM file_records" in statement:
            seen.append(statement)

    return seen


def get(app: Flask, path: str, account: Account | None = None) -> Any:
    return app.test_client().get(path, headers=account.auth if account else {})


def titel(app: Flask, record_id: str, account: Account) -> str | None:
    response = get(app, f"/api/files/{record_id}", account)
    assert response.status_code == 200
    return response.get_json()["titel"]


@pytest.fixture
def alice(replicas: Replicas) -> Account:
    return replicas.api.account("alice@example.org")


@pytest.fixture
def bob(replicas: Replicas) -> Account:
    return replicas.api.account("bob@example.org")


@pytest.fixture
def admin(replicas: Replicas) -> Account:
    return replicas.api.account("admin@example.org", admin=True)


@pytest.fixture
def record(replicas: Replicas, alice: Account) -> dict[str, Any]:
    return replicas.api.create(alice, titel="Erste Fassung", freigabe="false")


def test_a_read_record_is_not_read_again(replicas: Replicas, alice, admin, record):
    reads = record_reads(replicas.b)
    path = f"/api/files/{record['id']}"
    assert [get(replicas.b, path, alice).status_code for _ in range(10)] == [200] * 10
    assert [get(replicas.b, f"{path}/download", admin).status_code for _ in range(3)] == [200] * 3
    assert len(reads) == 1
    assert replicas.b.extensions["cache"].size(RECORDS) == 1


def test_a_request_answered_from_the_caches_takes_no_connection(
    replicas: Replicas, alice: Account, record
):
    checkouts: list[int] = []
    with replicas.b.app_context():
        sa.event.listen(db.engine, "checkout", lambda *_: checkouts.append(1))
    path = f"/api/files/{record['id']}"
    assert get(replicas.b, path, alice).status_code == 200
    assert checkouts  # the first request reads token and record
    checkouts.clear()
    assert [get(replicas.b, path, alice).status_code for _ in range(5)] == [200] * 5
    assert checkouts == []


def test_a_cached_record_is_shown_only_to_whoever_may_see_it(
    replicas: Replicas, alice, bob, admin, record
):
    assert bob.token_id == alice.id  # a check of his token id instead of his user id fails
    path = f"/api/files/{record['id']}"
    assert get(replicas.b, path, admin).status_code == 200  # now cached, not released

    assert get(replicas.b, path, bob).status_code == 404
    assert get(replicas.b, f"{path}/download", bob).status_code == 404
    assert get(replicas.b, f"/api/public/files/{record['id']}").status_code == 404
    assert get(replicas.b, f"/api/public/files/{record['id']}/download").status_code == 404
    assert get(replicas.b, path, alice).status_code == 200
    assert replicas.b.extensions["cache"].size(RECORDS) == 1

    # Released in the other process: the public sees it as soon as the news arrives.
    assert replicas.api.patch(record["id"], alice, {"freigabe": True}).status_code == 200
    wait_for(lambda: get(replicas.b, f"/api/public/files/{record['id']}").status_code == 200)
    assert get(replicas.b, path, bob).status_code == 404  # still not bob's


def test_a_change_in_this_process_is_seen_at_once(replicas: Replicas, alice, record):
    path = f"/api/files/{record['id']}"
    other = Api(replicas.b, replicas.b.test_client())
    assert titel(replicas.b, record["id"], alice) == "Erste Fassung"
    # No notifications from here on (the cache already listens): what follows is seen
    # because this process notes its own changes.
    replicas.sql("DROP TRIGGER file_records_changes ON file_records")

    assert other.patch(record["id"], alice, {"titel": "Zweite Fassung"}).status_code == 200
    assert titel(replicas.b, record["id"], alice) == "Zweite Fassung"

    # Also a statement the ORM does not see.
    with replicas.b.app_context():
        db.session.execute(sa.text("UPDATE file_records SET titel = 'Dritte Fassung'"))
        db.session.commit()
    assert titel(replicas.b, record["id"], alice) == "Dritte Fassung"

    assert other.delete(record["id"], alice).status_code == 204
    assert get(replicas.b, path, alice).status_code == 404


def test_changes_in_another_process_reach_the_cache(replicas: Replicas, alice, admin, record):
    path = f"/api/files/{record['id']}"
    assert titel(replicas.b, record["id"], alice) == "Erste Fassung"
    assert replicas.b.extensions["cache"].size(RECORDS) == 1

    assert replicas.api.patch(record["id"], alice, {"titel": "Zweite Fassung"}).status_code == 200
    # Seen long before the entry's age (60 s) would run out.
    wait_for(lambda: titel(replicas.b, record["id"], alice) == "Zweite Fassung")

    new_content = samples.pdf_bytes() + b"\n% second version\n"
    assert replicas.api.replace(alice, record["id"], "v2.pdf", new_content).status_code == 200
    wait_for(lambda: get(replicas.b, f"{path}/download", admin).data == new_content)
    assert get(replicas.b, path, alice).get_json()["original_name"] == "v2.pdf"

    assert replicas.api.delete(record["id"], alice).status_code == 204
    wait_for(lambda: get(replicas.b, path, alice).status_code == 404)


def test_an_update_statement_in_this_process_is_seen_without_the_notification(
    replicas: Replicas, alice, record
):
    """An UPDATE of file records sent through the session (not an ORM object's change) empties
    this process's entries itself; the database's notification is held back here."""
    assert titel(replicas.b, record["id"], alice) == "Erste Fassung"
    replicas.sql("DROP TRIGGER file_records_changes ON file_records")  # the cache stays on
    with replicas.b.app_context():
        db.session.execute(
            sa.update(FileRecord)
            .where(FileRecord.id == uuid.UUID(record["id"]))
            .values(titel="Zweite Fassung")
        )
        db.session.commit()
    assert titel(replicas.b, record["id"], alice) == "Zweite Fassung"


def test_a_download_follows_a_replace_made_elsewhere_before_its_notification(
    replicas: Replicas, alice, admin, record
):
    """Another process has replaced the record (and removed its old object), and its
    notification has not arrived yet: the download finds the cached record's object gone,
    reads the record again from the database rather than from the cache, and hands out the
    new content."""
    path = f"/api/files/{record['id']}/download"
    assert get(replicas.b, path, admin).status_code == 200
    assert replicas.b.extensions["cache"].size(RECORDS) == 1
    replicas.sql("DROP TRIGGER file_records_changes ON file_records")  # the cache stays on
    new_content = samples.pdf_bytes() + b"\n% second version\n"
    assert replicas.api.replace(alice, record["id"], "v2.pdf", new_content).status_code == 200
    response = get(replicas.b, path, admin)
    assert response.status_code == 200
    assert response.data == new_content


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("UPDATE file_records SET titel = 'Von Hand'", 200),
        ("DELETE FROM file_records", 404),
        # CASCADE: the stored citations (record_citations) refer to the records.
        ("TRUNCATE file_records CASCADE", 404),
    ],
    ids=["update", "delete", "truncate"],
)
def test_changes_by_hand_reach_the_cache(replicas: Replicas, alice, record, statement, expected):
    path = f"/api/files/{record['id']}"
    assert get(replicas.b, path, alice).status_code == 200
    assert replicas.b.extensions["cache"].size(RECORDS) == 1
    replicas.sql(statement)

    def changed() -> bool:
        response = get(replicas.b, path, alice)
        if expected == 404:
            return response.status_code == 404
        return response.get_json()["titel"] == "Von Hand"

    wait_for(changed)


@pytest.mark.parametrize(
    "statement",
    [
        "DROP TRIGGER file_records_changes ON file_records",
        "ALTER TABLE file_records DISABLE TRIGGER file_records_changes",
    ],
    ids=["dropped", "disabled"],
)
def test_without_the_trigger_nothing_is_cached(replicas: Replicas, alice, record, statement):
    replicas.sql(statement)
    app = replicas.app()
    reads = record_reads(app)
    path = f"/api/files/{record['id']}"
    assert [get(app, path, alice).status_code for _ in range(3)] == [200] * 3
    assert len(reads) == 3
    # A change elsewhere is then seen at once.
    replicas.api.patch(record["id"], alice, {"titel": "Zweite Fassung"})
    assert titel(app, record["id"], alice) == "Zweite Fassung"


def test_the_record_cache_can_be_turned_off(replicas: Replicas, alice, record):
    app = replicas.app(RECORD_CACHE_SECONDS=0)
    assert app.extensions["cache"].channels == (TOKENS,)
    reads = record_reads(app)
    path = f"/api/files/{record['id']}"
    assert [get(app, path, alice).status_code for _ in range(3)] == [200] * 3
    assert len(reads) == 3


def test_sqlite_has_no_record_cache(make_sqlite_app):
    assert "cache" not in make_sqlite_app().extensions


def test_a_read_between_a_change_and_its_commit_is_not_kept(replicas: Replicas, alice, record):
    """Another thread may read the record after this process changed it but before the
    commit: it still sees the old row, which must not stay in the cache."""
    path = f"/api/files/{record['id']}"
    assert titel(replicas.b, record["id"], alice) == "Erste Fassung"
    replicas.sql("DROP TRIGGER file_records_changes ON file_records")  # this process only
    with replicas.b.app_context():
        engine = db.engine
    read_meanwhile: list[str | None] = []

    def read_before_the_commit(_conn: Any) -> None:
        # SQLAlchemy's commit event comes before the database's commit; this listener comes
        # after the app's own ones.
        if not read_meanwhile:  # by another request, in a thread of its own
            reader = threading.Thread(
                target=lambda: read_meanwhile.append(titel(replicas.b, record["id"], alice))
            )
            reader.start()
            reader.join()

    sa.event.listen(engine, "commit", read_before_the_commit)
    with replicas.b.app_context():  # the app writes through its session
        db.session.execute(sa.text("UPDATE file_records SET titel = 'Zweite Fassung'"))
        db.session.commit()
    assert read_meanwhile == ["Erste Fassung"]  # the old row, read and cached
    assert titel(replicas.b, record["id"], alice) == "Zweite Fassung"
    assert get(replicas.b, path, alice).status_code == 200


def test_a_change_rolled_back_is_not_kept(replicas: Replicas, alice, admin, record):
    from app.auth.services import Caller
    from app.files.access import read_record

    assert titel(replicas.b, record["id"], alice) == "Erste Fassung"  # the cache listens
    replicas.sql("DROP TRIGGER file_records_changes ON file_records")  # this process only
    caller = Caller(token_id=0, id=admin.id, is_admin=True)
    with replicas.b.app_context():
        db.session.execute(sa.text("UPDATE file_records SET titel = 'Nie'"))
        assert read_record(caller, uuid.UUID(record["id"])).titel == "Nie"  # uncommitted, cached
        assert replicas.b.extensions["cache"].size(RECORDS) == 1
        db.session.rollback()
    assert titel(replicas.b, record["id"], alice) == "Erste Fassung"


@pytest.mark.parametrize(
    "statement",
    [
        "update FILE_RECORDS set titel = 'Von Hand'",
        "WITH changed AS (UPDATE file_records SET titel = 'Von Hand' RETURNING id) "
        "SELECT count(*) FROM changed",
        "/* bulk */ UPDATE public.file_records SET titel = 'Von Hand'",
    ],
    ids=["lower-case", "cte", "comment-schema"],
)
def test_any_spelling_of_a_change_in_this_process_is_noticed(
    replicas: Replicas, alice, record, statement
):
    assert titel(replicas.b, record["id"], alice) == "Erste Fassung"
    replicas.sql("DROP TRIGGER file_records_changes ON file_records")  # this process only
    with replicas.b.app_context():
        db.session.execute(sa.text(statement))
        db.session.commit()
    assert titel(replicas.b, record["id"], alice) == "Von Hand"
