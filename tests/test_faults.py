"""Faults injected for real: a proxy between the app and SeaweedFS / PostgreSQL drops, refuses or
answers 503. While a dependency is away the API answers 503 with a JSON message; afterwards the
database and the bucket agree."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import sqlalchemy as sa

from app import create_app
from app.extensions import db
from app.files.deletions import retry as retry_pending_deletions
from app.models import PendingObjectDeletion
from app.storage import StorageUnavailable
from tests.conftest import base_config, migrate_database
from tests.support import samples
from tests.support.api import Api
from tests.support.faultproxy import FaultProxy

pytestmark = [pytest.mark.postgres, pytest.mark.s3server]

STORAGE_DOWN = {"message": "Service unavailable: the file storage cannot be reached."}
DATABASE_DOWN = {"message": "Service unavailable: the database cannot be reached."}
STORAGE_FAULTS = ["refuse", "http503", "reset"]


class Stack:
    """The app behind two fault proxies, plus direct views of what the bucket and tables hold."""

    def __init__(self, app: Any, s3: FaultProxy, pg: FaultProxy, bucket: Any, name: str):
        self.app, self.s3, self.pg = app, s3, pg
        self.api = Api(app, app.test_client())
        self._bucket, self._name = bucket, name

    def objects(self) -> set[str]:
        listed = self._bucket.list_objects_v2(Bucket=self._name)
        return {item["Key"] for item in listed.get("Contents", [])}

    def stored_paths(self) -> set[str]:
        return {row.stored_path for row in self.api.rows()}


@pytest.fixture
def stack(make_postgres_database, s3_bucket: dict, seaweedfs, tmp_path: Path) -> Iterator[Stack]:
    url = sa.make_url(make_postgres_database())
    migrate_database(url.render_as_string(False), tmp_path)
    s3 = FaultProxy("127.0.0.1", int(seaweedfs.endpoint_url.rsplit(":", 1)[1]))
    pg = FaultProxy(url.host or "127.0.0.1", url.port or 5432)
    app = create_app(
        base_config(
            SQLALCHEMY_DATABASE_URI=url.set(port=pg.port).render_as_string(False),
            STORAGE_BACKEND="s3",
            S3_BUCKET=s3_bucket["S3_BUCKET"],
            S3_ENDPOINT_URL=f"http://{s3.address}",
            S3_REGION=seaweedfs.region,
            S3_MAX_ATTEMPTS=1,
            S3_CONNECT_TIMEOUT=2,
            S3_READ_TIMEOUT=5,
        )
    )
    bucket = boto3.client(
        "s3",
        endpoint_url=seaweedfs.endpoint_url,
        region_name=seaweedfs.region,
        aws_access_key_id=seaweedfs.access_key,
        aws_secret_access_key=seaweedfs.secret_key,
    )
    try:
        yield Stack(app, s3, pg, bucket, s3_bucket["S3_BUCKET"])
    finally:
        s3.close()
        pg.close()
        bucket.close()
        with app.app_context():
            db.engine.dispose()


@pytest.mark.parametrize("fault", STORAGE_FAULTS)
def test_create_while_storage_is_down(stack: Stack, fault: str):
    alice = stack.api.account("alice@example.org")
    stack.s3.set_mode(fault)
    response = stack.api.upload(alice, [("a.pdf", samples.pdf_bytes()), ("b.txt", b"b\n")])
    assert response.status_code == 503
    assert response.get_json() == STORAGE_DOWN
    stack.s3.set_mode("pass")
    assert stack.api.rows() == [] and stack.objects() == set()
    assert stack.api.upload(alice, [("a.txt", b"back\n")]).status_code == 201


@pytest.mark.parametrize("fault", STORAGE_FAULTS)
def test_replace_download_and_delete_while_storage_is_down(stack: Stack, fault: str):
    alice = stack.api.account("alice@example.org")
    data = samples.pdf_bytes()
    record = stack.api.create(alice, data=data)
    url = f"/api/files/{record['id']}"

    stack.s3.set_mode(fault)
    replaced = stack.api.replace(alice, record["id"], "new.png", samples.png_bytes())
    downloaded = stack.api.get(f"{url}/download", alice)
    deleted = stack.api.delete(record["id"], alice)
    for response in (replaced, downloaded, deleted):
        assert response.status_code == 503
        assert response.get_json() == STORAGE_DOWN

    stack.s3.set_mode("pass")
    assert stack.stored_paths() == stack.objects()  # one record, its one object
    assert stack.api.get(f"{url}/download", alice).data == data
    assert stack.api.delete(record["id"], alice).status_code == 204
    assert stack.api.rows() == [] and stack.objects() == set()


def test_slow_storage_is_still_served(stack: Stack):
    alice = stack.api.account("alice@example.org")
    stack.s3.delay = 0.2
    stack.s3.set_mode("delay")
    record = stack.api.create(alice, "a.txt", b"slow but fine\n")
    assert stack.api.get(f"/api/files/{record['id']}/download", alice).data == b"slow but fine\n"


def test_database_down_answers_503(stack: Stack):
    alice = stack.api.account("alice@example.org")
    record = stack.api.create(alice)
    stack.pg.set_mode("refuse")
    for response in (
        stack.api.get("/api/files", alice),
        stack.api.get(f"/api/files/{record['id']}/download", alice),
        stack.api.client.get("/api/public/files"),
        stack.api.upload(alice, [("a.txt", b"x\n")]),
        stack.api.delete(record["id"], alice),
    ):
        assert response.status_code == 503
        assert response.get_json() == DATABASE_DOWN
    stack.pg.set_mode("pass")
    assert stack.stored_paths() == stack.objects()
    assert len(stack.api.rows()) == 1


def test_connections_the_database_dropped_while_idle_are_replaced(stack: Stack):
    """Pooled connections are checked before use once idle for DB_PING_AFTER_IDLE_SECONDS:
    after a database restart (here: every connection cut) the next request just works."""
    alice = stack.api.account("alice@example.org")
    assert stack.api.get("/api/files", alice).status_code == 200
    stack.pg.cut_all()
    time.sleep(stack.app.config["DB_PING_AFTER_IDLE_SECONDS"] + 0.1)
    assert stack.api.get("/api/files", alice).status_code == 200
    assert stack.api.client.get("/api/public/files").status_code == 200


def test_database_lost_after_the_objects_were_stored(stack: Stack, monkeypatch: pytest.MonkeyPatch):
    """The connection dies between storing the objects and inserting the rows."""
    alice = stack.api.account("alice@example.org")
    storage = stack.app.extensions["storage"]
    real_writer = storage.writer

    def writer(key: str):
        inner = real_writer(key)
        real_commit = inner.commit

        def commit() -> None:
            real_commit()
            stack.pg.set_mode("refuse")  # the database goes away right after the object lands

        inner.commit = commit
        return inner

    monkeypatch.setattr(storage, "writer", writer)
    response = stack.api.upload(alice, [("a.txt", b"one\n")])
    assert response.status_code == 503
    assert response.get_json() == DATABASE_DOWN
    monkeypatch.undo()
    stack.pg.set_mode("pass")
    assert stack.api.rows() == [] and stack.objects() == set()


def pending_deletions(stack: Stack) -> list[str]:
    with stack.app.app_context():
        keys = list(db.session.scalars(sa.select(PendingObjectDeletion.key)))
        db.session.remove()
        return keys


def test_storage_lost_after_the_row_was_deleted_is_made_good_later(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
):
    """The bucket answers the pre-check, then goes away before the object is removed."""
    alice = stack.api.account("alice@example.org")
    doomed = stack.api.create(alice, "doomed.txt", b"doomed\n")
    other = stack.api.create(alice, "other.txt", b"other\n")
    doomed_key = stack.api.row(doomed["id"]).stored_path
    storage = stack.app.extensions["storage"]
    real_exists = storage.exists

    def exists(key: str) -> bool:
        found = real_exists(key)
        stack.s3.set_mode("refuse")
        return found

    monkeypatch.setattr(storage, "exists", exists)
    assert stack.api.delete(doomed["id"], alice).status_code == 204
    monkeypatch.undo()
    stack.s3.set_mode("pass")

    assert pending_deletions(stack) == [doomed_key]
    assert doomed_key in stack.objects()  # owed, not forgotten

    # The next successful deletion also carries out what is owed.
    assert stack.api.delete(other["id"], alice).status_code == 204
    assert pending_deletions(stack) == []
    assert stack.api.rows() == [] and stack.objects() == set()


def test_replace_records_the_old_object_as_owed_until_it_is_gone(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
):
    alice = stack.api.account("alice@example.org")
    record = stack.api.create(alice, "v1.txt", b"one\n")
    old_key = stack.api.row(record["id"]).stored_path
    storage = stack.app.extensions["storage"]

    def unavailable(key: str) -> None:
        raise StorageUnavailable("gone for a moment")

    monkeypatch.setattr(storage, "delete", unavailable)
    assert stack.api.replace(alice, record["id"], "v2.txt", b"two\n").status_code == 200
    monkeypatch.undo()
    assert pending_deletions(stack) == [old_key]
    with stack.app.app_context():
        assert retry_pending_deletions(storage) == (1, 0)
    assert pending_deletions(stack) == []
    assert stack.objects() == stack.stored_paths()
