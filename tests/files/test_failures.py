"""Failures in the middle leave no half-written record and no orphaned object."""

from __future__ import annotations

import io
import threading
import time

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from app.extensions import db
from app.models import FileRecord, FileVersion
from app.storage import StorageUnavailable
from tests.support import samples
from tests.support.api import Account, Api, encode_multipart


class FailingWriter:
    """Wraps a real writer and fails after some bytes, as a dropped connection would."""

    def __init__(self, inner, fail_after: int) -> None:
        self.inner, self.left = inner, fail_after

    def write(self, chunk: bytes) -> None:
        self.left -= len(chunk)
        if self.left < 0:
            raise StorageUnavailable("connection reset by peer")
        self.inner.write(chunk)

    def commit(self) -> None:
        self.inner.commit()

    def abort(self) -> None:
        self.inner.abort()


def break_storage_writes(api: Api, monkeypatch: pytest.MonkeyPatch, on_call: int) -> None:
    storage = api.app.extensions["storage"]
    original = storage.writer
    calls = {"n": 0}

    def writer(key: str):
        calls["n"] += 1
        inner = original(key)
        return FailingWriter(inner, 10) if calls["n"] == on_call else inner

    monkeypatch.setattr(storage, "writer", writer)


def break_record_commits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commits that write file records fail, as when the database goes away mid-request."""
    real_commit = db.session.commit

    def commit() -> None:
        pending = list(db.session.new) + list(db.session.dirty)
        if any(isinstance(obj, FileRecord) for obj in pending):
            raise OperationalError("COMMIT", {}, Exception("server closed the connection"))
        real_commit()

    monkeypatch.setattr(db.session, "commit", commit)


def test_storage_failure_on_a_later_file_rolls_back_the_whole_upload(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    break_storage_writes(api, monkeypatch, on_call=2)
    response = api.upload(alice, [("a.pdf", samples.pdf_bytes()), ("b.pdf", samples.pdf_bytes())])
    assert response.status_code == 503
    assert response.get_json() == {
        "message": "Service unavailable: the file storage cannot be reached."
    }
    assert api.rows() == [] and api.objects() == set()


class FailingCommit(FailingWriter):
    """A writer whose commit fails (and aborts itself, as the real ones do)."""

    def commit(self) -> None:
        self.inner.abort()
        raise StorageUnavailable("fsync failed")


class SlowCommit(FailingWriter):
    threads: set[str] = set()

    def commit(self) -> None:
        SlowCommit.threads.add(threading.current_thread().name)
        time.sleep(0.05)
        self.inner.commit()


def wrap_writers(api: Api, monkeypatch: pytest.MonkeyPatch, wrap) -> None:
    storage = api.app.extensions["storage"]
    original = storage.writer
    calls = {"n": 0}

    def writer(key: str):
        calls["n"] += 1
        return wrap(calls["n"], original(key))

    monkeypatch.setattr(storage, "writer", writer)


@pytest.mark.parametrize("failing", [1, 3, 6])
def test_a_failed_store_of_any_file_rolls_back_the_whole_upload(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch, failing: int
):
    """Also when the files before and after it were committed in the background."""
    wrap_writers(
        api,
        monkeypatch,
        lambda n, inner: FailingCommit(inner, 10**9) if n == failing else SlowCommit(inner, 10**9),
    )
    files = [(f"{i}.pdf", samples.pdf_bytes()) for i in range(6)]
    response = api.upload(alice, files)
    assert response.status_code == 503
    time.sleep(0.3)  # no commit still running lands an object after the answer either
    assert api.rows() == [] and api.objects() == set()


def test_files_committed_in_the_background_are_all_stored_before_the_answer(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    wrap_writers(api, monkeypatch, lambda n, inner: SlowCommit(inner, 10**9))
    SlowCommit.threads.clear()
    files = [(f"{i}.txt", f"file {i}\n".encode()) for i in range(8)]
    response = api.upload(alice, files)
    assert response.status_code == 201
    if api.app.extensions["storage"].commits_in_background:  # local: beside the parsing
        assert all(name.startswith("upload-commit") for name in SlowCommit.threads)
    else:  # S3: a commit holds its part in memory, so each is made in turn
        assert SlowCommit.threads == {threading.current_thread().name}
    monkeypatch.undo()
    created = response.get_json()["files"]
    assert len(api.objects()) == 8 == len(api.rows())
    for i, record in enumerate(created):
        download = api.get(f"/api/files/{record['id']}/download", alice)
        assert download.data == f"file {i}\n".encode()


def test_failed_commit_removes_the_stored_objects(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    break_record_commits(monkeypatch)
    response = api.upload(alice, [("a.pdf", samples.pdf_bytes())])
    assert response.status_code == 503
    assert "database" in response.get_json()["message"]
    monkeypatch.undo()
    assert api.rows() == [] and api.objects() == set()


def test_replace_failing_in_storage_keeps_the_old_version(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    data = samples.pdf_bytes()
    record = api.create(alice, data=data)
    before = api.row(record["id"])
    break_storage_writes(api, monkeypatch, on_call=1)
    response = api.replace(alice, record["id"], "new.pdf", samples.pdf_bytes())
    assert response.status_code == 503
    monkeypatch.undo()
    assert api.row(record["id"]).stored_path == before.stored_path
    assert api.objects() == {before.stored_path}
    assert api.get(f"/api/files/{record['id']}/download", alice).data == data


def test_replace_failing_to_commit_keeps_the_old_version(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    data = samples.pdf_bytes()
    record = api.create(alice, data=data)
    before = api.row(record["id"])

    break_record_commits(monkeypatch)
    response = api.replace(alice, record["id"], "new.png", samples.png_bytes())
    assert response.status_code == 503
    monkeypatch.undo()
    assert api.row(record["id"]).stored_path == before.stored_path
    assert api.objects() == {before.stored_path}
    assert api.get(f"/api/files/{record['id']}/download", alice).data == data


def test_download_while_storage_is_down_is_503(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    record = api.create(alice)
    storage = api.app.extensions["storage"]

    def unavailable(*args, **kwargs):
        raise StorageUnavailable("no route to host")

    monkeypatch.setattr(storage, "open", unavailable)
    response = api.get(f"/api/files/{record['id']}/download", alice)
    assert response.status_code == 503
    assert "storage" in response.get_json()["message"]


def test_missing_object_is_a_json_500_without_details(api: Api, alice: Account):
    record = api.create(alice)
    storage = api.app.extensions["storage"]
    storage.delete(api.row(record["id"]).stored_path)
    response = api.get(f"/api/files/{record['id']}/download", alice)
    assert response.status_code == 500
    body = response.get_json()
    assert list(body) == ["message"] and "Traceback" not in body["message"]


def test_delete_commits_the_row_before_removing_the_object(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    record = api.create(alice)
    key = api.row(record["id"]).stored_path
    storage = api.app.extensions["storage"]
    seen = {}
    original = storage.delete

    def delete(k: str) -> None:
        seen["row_at_delete"] = api.row(record["id"])
        original(k)

    monkeypatch.setattr(storage, "delete", delete)
    assert api.delete(record["id"], alice).status_code == 204
    assert seen["row_at_delete"] is None
    assert key not in api.objects()


def test_unexpected_errors_are_json_500_without_a_trace(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    import app.files.pagination as pagination

    def boom(*args, **kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(pagination, "paginate", boom)
    response = api.get("/api/files", alice)
    assert response.status_code == 500
    assert response.get_json() == {"message": "Server error."}


def versions_state(api: Api, record_id: str) -> tuple:
    """What a failed replacement must leave as it was: the record's version and content, its
    version rows, and every object."""
    row = api.row(record_id)
    with api.app.app_context():
        ended = db.session.execute(
            select(FileVersion.number, FileVersion.checksum_sha256, FileVersion.stored_path)
            .where(FileVersion.record_id == row.id)
            .order_by(FileVersion.number)
        ).all()
    return (row.version, row.stored_path, row.checksum_sha256, row.updated_at), ended, api.objects()


def a_kept_version(api: Api, alice: Account) -> str:
    """A record at version 2 whose version 1 is kept."""
    api.app.config["KEEP_RELEASED_VERSIONS"] = "on"
    record = api.create(alice, "v1.txt", b"version one\n")
    assert api.replace(alice, record["id"], "v2.txt", b"version two\n").status_code == 200
    return record["id"]


@pytest.mark.parametrize("failure", ["storage", "commit"])
def test_a_replacement_failing_half_way_leaves_the_versions_as_they_were(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch, failure: str
):
    """Issue 39: storage down while the new content streams in, or the database gone at the
    commit: the version, its rows and every content stay as they were."""
    rid = a_kept_version(api, alice)
    before = versions_state(api, rid)
    if failure == "storage":
        break_storage_writes(api, monkeypatch, on_call=1)
    else:
        break_record_commits(monkeypatch)
    response = api.replace(alice, rid, "v3.txt", b"version three\n", change_note="lost")
    assert response.status_code == 503
    monkeypatch.undo()
    assert versions_state(api, rid) == before
    assert api.get(f"/api/files/{rid}/download", alice).data == b"version two\n"
    assert api.get(f"/api/files/{rid}/versions/1/download", alice).data == b"version one\n"
    assert api.get(f"/api/files/{rid}", alice).get_json()["version"] == 2


def test_a_client_gone_mid_replacement_leaves_the_versions_as_they_were(api: Api, alice: Account):
    rid = a_kept_version(api, alice)
    before = versions_state(api, rid)
    content_type, body = encode_multipart(
        [
            ("change_note", None, b"never arrives", None),
            ("file", "v3.txt", b"version three\n" * 50_000, "text/plain"),
        ]
    )
    response = api.client.post(
        f"/api/files/{rid}/content",
        input_stream=io.BytesIO(body[: len(body) // 2]),  # the client stops half-way
        headers=alice.auth,
        content_type=content_type,
        environ_overrides={"CONTENT_LENGTH": str(len(body))},
    )
    assert response.status_code == 400
    assert versions_state(api, rid) == before
    assert api.get(f"/api/files/{rid}/download", alice).data == b"version two\n"
