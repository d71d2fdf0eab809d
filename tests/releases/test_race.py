"""An approval and concurrent replacements of the same record, against `flask serve` on both
stacks: whichever commits first wins, and the record is never released with bytes nobody
approved (the request is bound to the SHA-256 it was submitted with). Once released, its
replacements wait beside it for an approval of their own, and one racing that approval either
comes after it or supersedes it."""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.conftest import create_account
from tests.files.test_concurrent_writes import local_objects, s3_objects
from tests.support import server
from tests.support.api import encode_multipart
from tests.support.server import clean_env, running_server

ROUNDS = 6
REPLACES = 3


def version(n: int) -> bytes:
    return f"Fassung {n}\n".encode() * 3000


class Race:
    def __init__(self, port: int, engine: sa.Engine, log: Path, objects: Any) -> None:
        self.port, self.engine, self.log, self.objects = port, engine, log, objects
        self.auth: dict[str, dict[str, str]] = {}

    def login(self, email: str) -> None:
        body = json.dumps({"email": email, "password": "pw", "token_name": "t"}).encode()
        status, _, answer = server.request(
            self.port, "POST", "/api/tokens", body, {"Content-Type": "application/json"}
        )
        assert status == 201
        self.auth[email] = {"Authorization": f"Bearer {json.loads(answer)['token']}"}

    def call(self, who: str | None, method: str, path: str, body: bytes | None = None, **h: str):
        headers = {**(self.auth[who] if who else {}), **h}
        status, _, answer = server.request(self.port, method, path, body, headers)
        return status, answer

    def upload(self, who: str, path: str, field: str, n: int) -> tuple[int, Any]:
        content_type, form = encode_multipart([(field, f"v{n}.txt", version(n), "text/plain")])
        status, answer = self.call(who, "POST", path, form, **{"Content-Type": content_type})
        return status, json.loads(answer) if answer else None

    def server_errors(self) -> list[str]:
        return [line for line in self.log.read_text().splitlines() if '"level": "error"' in line]


@pytest.fixture(
    params=[
        "sqlite-local",
        pytest.param("postgres-s3", marks=[pytest.mark.postgres, pytest.mark.s3server]),
    ]
)
def race(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Race]:
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
    env = clean_env(
        **settings,
        RELEASE_APPROVAL="on",
        RATELIMIT_UPLOADS="100000 per minute",
        SERVER_THREADS="8",
    )
    for email in ("owner@example.org", "approver@example.org"):
        create_account(url, tmp_path / "unused", email, "pw")
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE users SET is_approver = true WHERE email LIKE 'approver@%'"))
    with running_server(env, tmp_path / "server.log") as port:
        race = Race(port, engine, tmp_path / "server.log", objects)
        race.login("owner@example.org")
        race.login("approver@example.org")
        yield race
    engine.dispose()


def test_an_approval_racing_replacements_never_releases_unapproved_bytes(race: Race):
    outcomes = set()
    for round_ in range(ROUNDS):
        status, body = race.upload("owner@example.org", "/api/files", "files[]", 0)
        assert status == 201, body
        record_id = body["files"][0]["id"]
        request_id = body["release_requests"][0]["id"]
        jobs = [
            lambda rid=request_id: race.call(
                "approver@example.org", "POST", f"/api/release-requests/{rid}/approve"
            )[0]
        ]
        jobs += [
            lambda n=n, rid=record_id: race.upload(
                "owner@example.org", f"/api/files/{rid}/content", "file", n
            )[0]
            for n in range(1, REPLACES + 1)
        ]
        if round_ % 2:
            jobs.reverse()
        with ThreadPoolExecutor(len(jobs)) as pool:
            statuses = list(pool.map(lambda job: job(), jobs))
        approve = statuses[-1] if round_ % 2 else statuses[0]
        replaces = statuses[:-1] if round_ % 2 else statuses[1:]
        assert set(statuses) <= {200, 409}, race.server_errors()
        public_status, public_bytes = race.call(
            None, "GET", f"/api/public/files/{record_id}/download"
        )
        _, record = race.call("owner@example.org", "GET", f"/api/files/{record_id}")
        record = json.loads(record)
        if approve == 200:
            # Released: with the submitted bytes; every replacement after it waits for an
            # approval of its own (tests/releases/test_held_changes.py).
            assert record["freigabe"] is True
            assert (public_status, public_bytes) == (200, version(0))
            assert set(replaces) == {200}
            outcomes.add("approved")
        else:
            assert approve == 409
            assert record["freigabe"] is False
            assert public_status == 404
            assert 200 in replaces
            outcomes.add("replaced")
        released = sa.text(
            "SELECT checksum_sha256 FROM file_records WHERE freigabe AND id = :id"
        ).bindparams(sa.bindparam("id", type_=sa.Uuid))
        with race.engine.connect() as conn:
            released_sha = conn.scalar(released, {"id": uuid.UUID(record_id)})
        if released_sha is not None:
            assert released_sha == hashlib.sha256(version(0)).hexdigest()
    assert race.server_errors() == []
    with race.engine.connect() as conn:
        stored = set(conn.scalars(sa.text("SELECT stored_path FROM file_records")))
        waiting = set(
            conn.scalars(
                sa.text(
                    "SELECT stored_path FROM file_versions "
                    "WHERE state = 'draft' AND stored_path IS NOT NULL"
                )
            )
        )
        owed = list(conn.scalars(sa.text("SELECT key FROM pending_object_deletions")))
    assert owed == []
    assert race.objects() == stored | waiting
    assert outcomes  # at least one round decided; which one wins is the race's


def test_an_approval_racing_replacements_of_a_released_record_releases_only_approved_bytes(
    race: Race,
):
    """A released record's replacement waits for approval; further replacements racing its
    approval either come after it (and wait in turn) or supersede it (and the approval is
    refused): the public only ever gets bytes an approver approved."""
    status, body = race.upload("owner@example.org", "/api/files", "files[]", 0)
    assert status == 201, body
    record_id = body["files"][0]["id"]
    first = body["release_requests"][0]["id"]
    assert (
        race.call("approver@example.org", "POST", f"/api/release-requests/{first}/approve")[0]
        == 200
    )
    public = version(0)
    outcomes = set()
    for round_ in range(ROUNDS):
        base = 10 * (round_ + 1)
        status, body = race.upload(
            "owner@example.org", f"/api/files/{record_id}/content", "file", base
        )
        assert status == 200, body
        request_id = body["release_request"]["id"]
        assert (
            body["release_request"]["pending"]["content"]["sha256"]
            == hashlib.sha256(version(base)).hexdigest()
        )
        jobs = [
            lambda rid=request_id: race.call(
                "approver@example.org", "POST", f"/api/release-requests/{rid}/approve"
            )[0]
        ]
        jobs += [
            lambda n=base + n: race.upload(
                "owner@example.org", f"/api/files/{record_id}/content", "file", n
            )[0]
            for n in range(1, REPLACES + 1)
        ]
        if round_ % 2:
            jobs.reverse()
        with ThreadPoolExecutor(len(jobs)) as pool:
            statuses = list(pool.map(lambda job: job(), jobs))
        approve = statuses[-1] if round_ % 2 else statuses[0]
        replaces = statuses[:-1] if round_ % 2 else statuses[1:]
        assert set(replaces) == {200}, race.server_errors()
        assert approve in (200, 409), race.server_errors()
        if approve == 200:
            public = version(base)
            outcomes.add("approved")
        else:
            outcomes.add("superseded")
        public_status, public_bytes = race.call(
            None, "GET", f"/api/public/files/{record_id}/download"
        )
        assert (public_status, public_bytes) == (200, public)
    approved = sa.text(
        "SELECT content_sha256 FROM release_requests WHERE state = 'approved' AND record_id = :id"
    ).bindparams(sa.bindparam("id", type_=sa.Uuid))
    current = sa.text("SELECT checksum_sha256 FROM file_records WHERE id = :id").bindparams(
        sa.bindparam("id", type_=sa.Uuid)
    )
    with race.engine.connect() as conn:
        assert conn.scalar(current, {"id": uuid.UUID(record_id)}) in set(
            conn.scalars(approved, {"id": uuid.UUID(record_id)})
        )
        stored = set(conn.scalars(sa.text("SELECT stored_path FROM file_records")))
        waiting = set(
            conn.scalars(
                sa.text(
                    "SELECT stored_path FROM file_versions "
                    "WHERE state = 'draft' AND stored_path IS NOT NULL"
                )
            )
        )
        owed = list(conn.scalars(sa.text("SELECT key FROM pending_object_deletions")))
    assert race.server_errors() == []
    assert owed == []
    assert len(waiting) == 1  # the last replacement waits; every superseded one is gone
    assert race.objects() == stored | waiting
    assert outcomes
