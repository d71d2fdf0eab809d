"""Many clients on one record at once, against a running server on PostgreSQL and S3."""

from __future__ import annotations

import hashlib
import json
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.conftest import create_account
from tests.support.api import encode_multipart
from tests.support.server import clean_env, request, running_server

pytestmark = [pytest.mark.postgres, pytest.mark.s3server]

VERSIONS = 12
OPERATIONS = 72


def version_bytes(n: int) -> bytes:
    """Distinct text contents of a few hundred KiB, so downloads overlap with replaces."""
    return (f"Version {n}: ".encode() + bytes(range(48, 58)) * 3 + b"\n") * 12_000


@pytest.fixture
def server(
    postgres_s3_env: dict, make_postgres_database, s3_bucket: dict, seaweedfs, tmp_path: Path
):
    # A migrated database copied and an account made in this process: the subject is the
    # server's concurrency, not `flask db upgrade` or `flask create-user` (tested elsewhere).
    url = make_postgres_database(migrated=True)
    env = clean_env(
        **{**postgres_s3_env, "DATABASE_URL": url},
        RATELIMIT_UPLOADS="10000 per minute",
        SERVER_THREADS="8",
    )
    create_account(url, tmp_path / "unused", "c@example.org", "pw")
    bucket = boto3.client(
        "s3",
        endpoint_url=seaweedfs.endpoint_url,
        region_name=seaweedfs.region,
        aws_access_key_id=seaweedfs.access_key,
        aws_secret_access_key=seaweedfs.secret_key,
    )
    with running_server(env, tmp_path / "server.log") as port:
        status, _, body = request(
            port,
            "POST",
            "/api/tokens",
            json.dumps({"email": "c@example.org", "password": "pw", "token_name": "c"}).encode(),
            {"Content-Type": "application/json"},
        )
        assert status == 201
        auth = {"Authorization": f"Bearer {json.loads(body)['token']}"}
        yield port, auth, lambda prefix: _keys(bucket, s3_bucket["S3_BUCKET"], prefix), tmp_path

    bucket.close()


def _keys(client: Any, bucket: str, prefix: str) -> list[str]:
    listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return [item["Key"] for item in listed.get("Contents", [])]


def server_errors(tmp_path: Path) -> list[str]:
    log = (tmp_path / "server.log").read_text()
    return [line[-3000:] for line in log.splitlines() if '"level": "error"' in line]


def upload(port: int, auth: dict, path: str, field: str, n: int) -> tuple[int, bytes]:
    content_type, form = encode_multipart([(field, f"v{n}.txt", version_bytes(n), "text/plain")])
    status, _, body = request(port, "POST", path, form, {**auth, "Content-Type": content_type})
    return status, body


def run_mix(port: int, auth: dict, record_id: str, with_delete: bool) -> list[tuple[str, int, Any]]:
    rng = random.Random(20261121)
    kinds = ["replace", "patch", "download", "download"]
    plan = [(rng.choice(kinds), i) for i in range(OPERATIONS)]
    if with_delete:
        plan.insert(OPERATIONS // 2, ("delete", -1))

    def run(op: tuple[str, int]) -> tuple[str, int, Any]:
        kind, i = op
        base = f"/api/files/{record_id}"
        if kind == "replace":
            return kind, upload(port, auth, f"{base}/content", "file", i % VERSIONS)[0], i
        if kind == "patch":
            body = json.dumps({"titel": f"titel {i}"}).encode()
            headers = {**auth, "Content-Type": "application/json"}
            return kind, request(port, "PATCH", base, body, headers)[0], i
        if kind == "delete":
            return kind, request(port, "DELETE", base, headers=auth)[0], i
        status, _, data = request(port, "GET", f"{base}/download", headers=auth)
        return kind, status, hashlib.sha256(data).hexdigest() if status == 200 else None

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(run, plan))


@pytest.mark.parametrize("with_delete", [False, True], ids=["replace-patch-read", "with-delete"])
def test_parallel_operations_on_one_record(server, with_delete: bool):
    port, auth, keys, tmp_path = server
    status, body = upload(port, auth, "/api/files", "files[]", 0)
    assert status == 201
    record_id = json.loads(body)["files"][0]["id"]
    hashes = {hashlib.sha256(version_bytes(n)).hexdigest() for n in range(VERSIONS)}

    results = run_mix(port, auth, record_id, with_delete)

    allowed = {"replace": {200}, "patch": {200}, "download": {200}, "delete": {204}}
    if with_delete:
        allowed = {kind: codes | {404} for kind, codes in allowed.items()}
    for kind, status, detail in results:
        assert status in allowed[kind], (kind, status, detail, server_errors(tmp_path))
        if kind == "download" and status == 200:
            assert detail in hashes, "a download returned a mix of versions"

    status, _, raw = request(port, "GET", f"/api/files/{record_id}", headers=auth)
    objects = keys(f"files/{record_id}/")
    if with_delete:
        # Serially, the delete makes everything after it a 404 and leaves nothing behind.
        assert status == 404
        assert objects == []
        return
    record = json.loads(raw)
    status, _, data = request(port, "GET", f"/api/files/{record_id}/download", headers=auth)
    assert status == 200 and hashlib.sha256(data).hexdigest() in hashes
    assert record["size"] == len(data)
    patched = {f"titel {i}" for kind, _, i in results if kind == "patch"}
    assert record["titel"] in patched
    assert len(objects) == 1, objects
    assert record["original_name"] in {f"v{n}.txt" for n in range(VERSIONS)}
