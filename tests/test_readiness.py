"""`GET /readyz` and the storage: a write probe, bounded in time and asked at most once per
cache window, whatever the polling rate (issue 35, point 5)."""

from __future__ import annotations

import errno
import io
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from app import create_app
from app.extensions import db
from app.ops.reconcile import reconcile_command
from app.storage import WRITE_PROBE_KEY, LocalStorage, ObjectWriter, StorageUnavailable
from tests.ops.helpers import LOCAL_ONLY

NOT_WRITABLE = {
    "message": "Service unavailable: storage not writable.",
    "status": "unavailable",
    "checks": {"database": "ok", "storage": "fail"},
}
READY = {"status": "ok", "checks": {"database": "ok", "storage": "ok"}}


@pytest.fixture
def make_app(stack_config: dict[str, Any]) -> Iterator[Any]:
    """Apps on this test's stack with their own readiness settings."""
    apps: list[Flask] = []

    def make(**overrides: Any) -> Flask:
        app = create_app({**stack_config, **overrides})
        apps.append(app)
        return app

    yield make
    for app in apps:
        with app.app_context():
            db.engine.dispose()


def count_writes(app: Flask, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The keys of every write the app's storage starts, in order."""
    storage = app.extensions["storage"]
    started: list[str] = []
    real_writer = storage.writer

    def writer(key: str) -> ObjectWriter:
        started.append(key)
        return real_writer(key)

    monkeypatch.setattr(storage, "writer", writer)
    return started


# --- a storage that answers but cannot be written -----------------------------------------

BUCKET = "files-ready"
#: SeaweedFS identities: the service's rights on the bucket, and reading and listing only.
RIGHTS = {
    "service": [f"Read:{BUCKET}", f"Write:{BUCKET}", f"List:{BUCKET}"],
    "reader": [f"Read:{BUCKET}", f"List:{BUCKET}"],
}


@pytest.fixture(scope="module")
def limited_seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.support.seaweedfs import start_seaweedfs_with_rights

    server = start_seaweedfs_with_rights(tmp_path_factory.mktemp("seaweedfs-ready"), RIGHTS)
    admin = server.client()
    try:
        admin.create_bucket(Bucket=BUCKET)
        yield server
    finally:
        admin.close()
        server.stop()


@pytest.mark.s3server
def test_a_bucket_that_refuses_writes_is_not_ready(
    limited_seaweedfs, make_sqlite_app, monkeypatch: pytest.MonkeyPatch
):
    """The bucket answers (HEAD, reads, listing) but refuses every upload: not ready."""
    access_key, secret_key = limited_seaweedfs.keys["reader"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret_key)
    app = make_sqlite_app(**limited_seaweedfs.storage_config(BUCKET))
    storage = app.extensions["storage"]
    storage.check()  # it answers
    with pytest.raises(StorageUnavailable, match="AccessDenied|access denied|denied"):
        storage.put(f"files/{uuid.uuid4()}/{uuid.uuid4()}", io.BytesIO(b"an upload"))

    response = app.test_client().get("/readyz")
    assert response.status_code == 503
    assert response.get_json() == NOT_WRITABLE
    assert response.headers["Cache-Control"] == "no-store"


@pytest.mark.s3server
def test_the_services_own_rights_are_enough_to_be_ready(
    limited_seaweedfs, make_sqlite_app, monkeypatch: pytest.MonkeyPatch
):
    access_key, secret_key = limited_seaweedfs.keys["service"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret_key)
    app = make_sqlite_app(**limited_seaweedfs.storage_config(BUCKET))
    writes = count_writes(app, monkeypatch)
    response = app.test_client().get("/readyz")
    assert (response.status_code, response.get_json()) == (200, READY)
    assert writes == [WRITE_PROBE_KEY]
    assert list(app.extensions["storage"].iter_keys()) == []  # the probe deleted its object


def refuse_writes_under(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make creating, replacing and removing anything inside `folder` fail with EROFS, as a
    read-only mount or a folder of another user would, even when the tests run as root."""
    inside = str(folder.resolve()) + os.sep

    def refused(path: Any) -> bool:
        return isinstance(path, str | os.PathLike) and (
            os.path.abspath(os.fspath(path)) + os.sep
        ).startswith(inside)

    def error(path: Any) -> OSError:
        return OSError(errno.EROFS, "Read-only file system", os.fspath(path))

    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    real = {name: getattr(os, name) for name in ("open", "mkdir", "replace", "unlink", "rmdir")}

    def open_(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & writing and refused(path):
            raise error(path)
        return real["open"](path, flags, *args, **kwargs)

    def changing(name: str) -> Any:
        def change(*args: Any, **kwargs: Any) -> Any:
            target = args[1] if name == "replace" else args[0]
            if refused(target):
                raise error(target)
            return real[name](*args, **kwargs)

        return change

    monkeypatch.setattr(os, "open", open_)
    for name in ("mkdir", "replace", "unlink", "rmdir"):
        monkeypatch.setattr(os, name, changing(name))


@LOCAL_ONLY
@pytest.mark.parametrize("read_only", ["files", "root"])
def test_a_storage_folder_that_cannot_be_written_is_not_ready(
    make_app, read_only: str, monkeypatch: pytest.MonkeyPatch
):
    """`files/` read-only (say, restored by another user) while the rest of the root is
    writable, and the whole root read-only: uploads fail, and so does /readyz."""
    app = make_app()
    storage: LocalStorage = app.extensions["storage"]
    storage.ensure_folders()
    (storage.root / "files").mkdir()
    refuse_writes_under(
        storage.root / "files" if read_only == "files" else storage.root, monkeypatch
    )
    with pytest.raises(StorageUnavailable, match="Read-only file system"):
        storage.put(f"files/{uuid.uuid4()}/{uuid.uuid4()}", io.BytesIO(b"an upload"))

    response = app.test_client().get("/readyz")
    assert response.status_code == 503
    body = response.get_json()
    if read_only == "files":
        assert body == NOT_WRITABLE
    else:  # the first check, which makes a temporary file, already fails
        assert body == {**NOT_WRITABLE, "message": "Service unavailable: storage not reachable."}


# --- polling does not load the storage ----------------------------------------------------


def test_polling_writes_at_most_once_per_cache_window(make_app, monkeypatch: pytest.MonkeyPatch):
    app = make_app(READYZ_CACHE_SECONDS=3600)
    writes = count_writes(app, monkeypatch)
    answers: list[Any] = []

    def poll() -> None:
        answers.append(app.test_client().get("/readyz"))

    # Eight at once while the first probe runs, then twenty in a row.
    threads = [threading.Thread(target=poll) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client = app.test_client()
    answers += [client.get("/readyz") for _ in range(20)]
    assert [(a.status_code, a.get_json()) for a in answers] == [(200, READY)] * 28
    assert writes == [WRITE_PROBE_KEY]
    assert list(app.extensions["storage"].iter_keys()) == []


def test_after_the_cache_window_the_storage_is_asked_again(
    make_app, monkeypatch: pytest.MonkeyPatch
):
    app = make_app(READYZ_CACHE_SECONDS=0)
    writes = count_writes(app, monkeypatch)
    client = app.test_client()
    for _ in range(3):
        assert client.get("/readyz").status_code == 200
    assert writes == [WRITE_PROBE_KEY] * 3

    def refuse(key: str) -> ObjectWriter:
        raise StorageUnavailable("the storage refuses writes now")

    monkeypatch.setattr(app.extensions["storage"], "writer", refuse)
    assert client.get("/readyz").get_json() == NOT_WRITABLE


def test_a_hanging_storage_is_reported_in_bounded_time(make_app, monkeypatch: pytest.MonkeyPatch):
    """The answer comes within the probe's timeout; while the probe hangs, polling starts no
    second one; once it ends, its result counts."""
    app = make_app(READYZ_CACHE_SECONDS=0, READYZ_PROBE_TIMEOUT_SECONDS=0.3)
    storage = app.extensions["storage"]
    released = threading.Event()
    started: list[str] = []
    real_writer = storage.writer

    def hanging_writer(key: str) -> ObjectWriter:
        started.append(key)
        released.wait(30)
        return real_writer(key)

    monkeypatch.setattr(storage, "writer", hanging_writer)
    client = app.test_client()
    try:
        for _ in range(3):
            began = time.monotonic()
            response = client.get("/readyz")
            assert time.monotonic() - began < 2
            assert response.status_code == 503
            assert response.get_json() == {
                "message": "Service unavailable: storage not answering in time.",
                "status": "unavailable",
                "checks": {"database": "ok", "storage": "fail"},
            }
        assert started == [WRITE_PROBE_KEY]
    finally:
        released.set()
    # The next poll waits for the running probe, or starts the next one if it has ended.
    assert client.get("/readyz").status_code == 200
    assert started in ([WRITE_PROBE_KEY], [WRITE_PROBE_KEY] * 2)


# --- the probe's object is not an orphan --------------------------------------------------


def test_reconcile_never_reports_the_probes_object(make_app):
    """A process killed between the probe's write and its delete leaves the object behind:
    `storage reconcile` neither lists nor removes it; a real orphan beside it still is."""
    app = make_app()
    storage = app.extensions["storage"]
    storage.put(WRITE_PROBE_KEY, io.BytesIO(b"left by a killed probe"))
    orphan = f"files/{uuid.uuid4()}/{uuid.uuid4()}"
    storage.put(orphan, io.BytesIO(b"left behind by a killed upload"))
    runner = app.test_cli_runner()

    listed = runner.invoke(reconcile_command, ["--grace-minutes", "0"])
    assert listed.exit_code == 0, listed.output
    assert WRITE_PROBE_KEY not in listed.output
    assert f"orphaned object {orphan}" in listed.output
    assert "orphaned objects: 1 " in listed.output

    fixed = runner.invoke(reconcile_command, ["--fix", "--grace-minutes", "0"])
    assert fixed.exit_code == 0, fixed.output
    assert WRITE_PROBE_KEY not in fixed.output
    assert set(storage.iter_keys()) == {WRITE_PROBE_KEY}
    # And /readyz goes on probing next to it (and takes its own object away again).
    assert app.test_client().get("/readyz").status_code == 200
    assert set(storage.iter_keys()) == set()
