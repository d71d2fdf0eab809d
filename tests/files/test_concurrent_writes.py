"""50 clients changing the same records at once, against `flask serve`, on SQLite with local
storage (the default) and on PostgreSQL with S3: no 500, no lost update, and the rows and
objects left behind agree (no orphaned object, no owed deletion left)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
import sqlalchemy as sa

from tests.conftest import create_account
from tests.support import server
from tests.support.api import encode_multipart, parse_timestamp
from tests.support.server import clean_env, running_server

WAYS = 50


def version(n: int) -> bytes:
    return f"Version {n}\n".encode() * 2000


@dataclass
class Stack:
    port: int
    auth: dict[str, str]
    engine: sa.Engine
    objects: Callable[[], set[str]]
    log: Path

    def call(self, method: str, path: str, body: bytes | None = None, **headers: str):
        status, _, answer = server.request(self.port, method, path, body, {**self.auth, **headers})
        return status, answer

    def upload(self, path: str, field: str, n: int) -> tuple[int, Any]:
        content_type, form = encode_multipart([(field, f"v{n}.txt", version(n), "text/plain")])
        status, body = self.call("POST", path, form, **{"Content-Type": content_type})
        return status, json.loads(body) if body else None

    def create(self, n: int = 0) -> str:
        status, body = self.upload("/api/files", "files[]", n)
        assert status == 201, body
        return body["files"][0]["id"]

    def stored_paths(self) -> set[str]:
        """The keys the rows name: every record's current content and every kept version."""
        with self.engine.connect() as conn:
            current = set(conn.scalars(sa.text("SELECT stored_path FROM file_records")))
            kept = conn.scalars(
                sa.text("SELECT stored_path FROM file_versions WHERE stored_path IS NOT NULL")
            )
            return current | set(kept)

    def owed_deletions(self) -> list[str]:
        with self.engine.connect() as conn:
            return list(conn.scalars(sa.text("SELECT key FROM pending_object_deletions")))

    def server_errors(self) -> list[str]:
        return [line for line in self.log.read_text().splitlines() if '"level": "error"' in line]

    def assert_consistent(self) -> None:
        assert self.server_errors() == []
        assert self.owed_deletions() == []
        assert self.objects() == self.stored_paths()


def local_objects(root: Path) -> Callable[[], set[str]]:
    def objects() -> set[str]:
        files = root / "files"
        if not files.exists():
            return set()
        return {p.relative_to(root).as_posix() for p in files.rglob("*") if p.is_file()}

    return objects


def s3_objects(seaweedfs: Any, bucket: str) -> Callable[[], set[str]]:
    client = boto3.client(
        "s3",
        endpoint_url=seaweedfs.endpoint_url,
        region_name=seaweedfs.region,
        aws_access_key_id=seaweedfs.access_key,
        aws_secret_access_key=seaweedfs.secret_key,
    )

    def objects() -> set[str]:
        listed = client.list_objects_v2(Bucket=bucket, Prefix="files/")
        return {item["Key"] for item in listed.get("Contents", [])}

    return objects


@pytest.fixture(
    params=[
        "sqlite-local",
        pytest.param("postgres-s3", marks=[pytest.mark.postgres, pytest.mark.s3server]),
    ]
)
def stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stack]:
    # A migrated database copied and an account made in this process: the subject is the
    # server's concurrency, not `flask db upgrade` or `flask create-user` (tested elsewhere).
    if request.param == "sqlite-local":
        shutil.copyfile(request.getfixturevalue("sqlite_template"), tmp_path / "db.sqlite3")
        url = f"sqlite:///{tmp_path / 'db.sqlite3'}"
        settings = {"DATABASE_URL": url, "STORAGE_LOCAL_ROOT": str(tmp_path / "storage")}
        objects = local_objects(tmp_path / "storage")
    else:
        settings = request.getfixturevalue("postgres_s3_env")
        url = settings["DATABASE_URL"] = request.getfixturevalue("make_postgres_database")(
            migrated=True
        )
        objects = s3_objects(request.getfixturevalue("seaweedfs"), settings["S3_BUCKET"])
    keep = "on" if request.node.get_closest_marker("keep_released_versions") else "off"
    env = clean_env(
        **settings,
        RATELIMIT_UPLOADS="100000 per minute",
        SERVER_THREADS="8",
        KEEP_RELEASED_VERSIONS=keep,
    )
    create_account(url, tmp_path / "unused", "c@example.org", "pw")
    engine = sa.create_engine(url)
    with running_server(env, tmp_path / "server.log") as port:
        login = {"email": "c@example.org", "password": "pw", "token_name": "c"}
        status, _, body = server.request(
            port,
            "POST",
            "/api/tokens",
            json.dumps(login).encode(),
            {"Content-Type": "application/json"},
        )
        assert status == 201
        auth = {"Authorization": f"Bearer {json.loads(body)['token']}"}
        yield Stack(port, auth, engine, objects, tmp_path / "server.log")
    engine.dispose()


def at_once(jobs: list[Callable[[], Any]]) -> list[Any]:
    with ThreadPoolExecutor(max_workers=WAYS) as pool:
        return list(pool.map(lambda job: job(), jobs))


def test_replace_against_replace_keeps_the_last_committed_version(stack: Stack):
    record_id = stack.create()
    results = at_once(
        [
            lambda n=n: stack.upload(f"/api/files/{record_id}/content", "file", n)
            for n in range(1, WAYS + 1)
        ]
    )
    assert [status for status, _ in results] == [200] * WAYS, stack.server_errors()
    last = max((body for _, body in results), key=lambda body: parse_timestamp(body["updated_at"]))
    status, data = stack.call("GET", f"/api/files/{record_id}/download")
    assert status == 200
    assert data == version(int(last["original_name"][1:-4]))
    status, body = stack.call("GET", f"/api/files/{record_id}")
    assert json.loads(body)["updated_at"] == last["updated_at"]
    stack.assert_consistent()
    assert len(stack.objects()) == 1


@pytest.mark.keep_released_versions
def test_concurrent_replacements_give_consecutive_versions_whose_rows_and_bytes_agree(
    stack: Stack,
):
    """Issue 39: every replacement gets its own version number, one after the other; each
    ended version's row and kept bytes agree with its checksum, and the current content is
    the one with the highest number."""
    record_id = stack.create()
    results = at_once(
        [
            lambda n=n: stack.upload(f"/api/files/{record_id}/content", "file", n)
            for n in range(1, WAYS + 1)
        ]
    )
    assert [status for status, _ in results] == [200] * WAYS, stack.server_errors()
    numbers = sorted(body["version"] for _, body in results)
    assert numbers == list(range(2, WAYS + 2))
    by_version = {body["version"]: int(body["original_name"][1:-4]) for _, body in results}
    by_version[1] = 0
    status, data = stack.call("GET", f"/api/files/{record_id}/download")
    assert data == version(by_version[WAYS + 1])
    with stack.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT number, checksum_sha256, original_name FROM file_versions ORDER BY number"
            )
        ).all()
    assert [row.number for row in rows] == list(range(1, WAYS + 1))
    for row in rows:
        expected = version(by_version[row.number])
        assert row.checksum_sha256 == hashlib.sha256(expected).hexdigest()
        assert row.original_name == f"v{by_version[row.number]}.txt"
        status, kept = stack.call("GET", f"/api/files/{record_id}/versions/{row.number}/download")
        assert (status, kept) == (200, expected)
    stack.assert_consistent()
    assert len(stack.objects()) == WAYS + 1


def race_with_a_delete(stack: Stack, change: Callable[[str, int], int]) -> None:
    """WAYS - 1 changes of one record with its delete in the middle: each change is 200 or
    404 (never 500), the record is gone, and so is every object and owed deletion."""
    record_id = stack.create()
    jobs: list[Callable[[], int]] = [lambda n=n: change(record_id, n) for n in range(1, WAYS)]
    jobs.insert(WAYS // 2, lambda: stack.call("DELETE", f"/api/files/{record_id}")[0])
    statuses = at_once(jobs)
    assert statuses[WAYS // 2] == 204
    assert set(statuses) <= {200, 204, 404}, stack.server_errors()
    assert stack.call("GET", f"/api/files/{record_id}")[0] == 404
    stack.assert_consistent()
    assert stack.objects() == set()


def test_replace_against_delete_leaves_nothing_behind(stack: Stack):
    race_with_a_delete(
        stack, lambda record_id, n: stack.upload(f"/api/files/{record_id}/content", "file", n)[0]
    )


def test_patch_against_delete_is_200_or_404_never_500(stack: Stack):
    def patch(record_id: str, n: int) -> int:
        body = json.dumps({"titel": f"titel {n}", "reihenfolge": n}).encode()
        headers = {"Content-Type": "application/json"}
        return stack.call("PATCH", f"/api/files/{record_id}", body, **headers)[0]

    race_with_a_delete(stack, patch)


def test_patches_of_different_fields_all_survive(stack: Stack):
    record_id = stack.create()
    fields = ["titel", "beschreibung", "autoren", "sachschlagwoerter", "org_themen", "reprotyp"]
    jobs = [
        lambda name=name, n=n: stack.call(
            "PATCH",
            f"/api/files/{record_id}",
            json.dumps({name: f"{name} {n}"}).encode(),
            **{"Content-Type": "application/json"},
        )[0]
        for n in range(WAYS // len(fields))
        for name in fields
    ]
    assert set(at_once(jobs)) == {200}, stack.server_errors()
    record = json.loads(stack.call("GET", f"/api/files/{record_id}")[1])
    for name in fields:
        assert record[name] is not None and record[name].startswith(name), name


def test_create_against_delete_keeps_rows_and_objects_in_step(stack: Stack):
    old = [stack.create(n) for n in range(WAYS // 2)]
    jobs: list[Callable[[], Any]] = []
    for n, record_id in enumerate(old):
        jobs.append(lambda n=n: stack.upload("/api/files", "files[]", 100 + n))
        jobs.append(
            lambda record_id=record_id: (stack.call("DELETE", f"/api/files/{record_id}")[0], None)
        )
    results = at_once(jobs)
    created = [body["files"][0]["id"] for status, body in results[::2] if status == 201]
    assert [status for status, _ in results[::2]] == [201] * (WAYS // 2), stack.server_errors()
    assert [status for status, _ in results[1::2]] == [204] * (WAYS // 2)
    with stack.engine.connect() as conn:
        ids = {str(value) for value in conn.scalars(sa.text("SELECT id FROM file_records"))}
    assert {value.replace("-", "") for value in ids} == {
        value.replace("-", "") for value in created
    }
    stack.assert_consistent()
    assert len(stack.objects()) == WAYS // 2
