"""Many PATCHes on one upload at once through a real server, on both stacks (a client that
retries a timed-out PATCH does this without meaning to): one writer at a time, completion
exactly once, and a clean-up that never touches the committed record's object."""

from __future__ import annotations

import base64
import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests
import sqlalchemy as sa

from tests.tus.conftest import Deployment, MiB, text_content
from tests.tus.test_tuspy import leftovers

TUS = {"Tus-Resumable": "1.0.0"}
OFFSET_TYPE = "application/offset+octet-stream"
LENGTH = 2 * MiB


def stored_objects(deployment: Deployment) -> set[str]:
    """Keys of finished objects (under `files/`) in the deployment's storage."""
    if deployment.stack == "sqlite-local":
        root = deployment.tmp_path / "storage"
        files = root / "files"
        return {str(p.relative_to(root)) for p in files.rglob("*") if p.is_file()}
    import boto3

    env = deployment.env
    s3 = boto3.client(
        "s3",
        endpoint_url=env["S3_ENDPOINT_URL"],
        region_name=env["S3_REGION"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=env["S3_BUCKET"], Prefix="files/")
    return {o["Key"] for page in pages for o in page.get("Contents", [])}


def rows(deployment: Deployment, statement: str, **params: Any) -> list[Any]:
    engine = sa.create_engine(deployment.env["DATABASE_URL"])
    try:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(statement), params))
    finally:
        engine.dispose()


def test_fifty_patches_at_once_make_one_record_from_one_body(deployment: Deployment):
    auth = deployment.auth()
    before = stored_objects(deployment)
    created = requests.post(
        deployment.endpoint,
        headers={
            **TUS,
            **auth,
            "Upload-Length": str(LENGTH),
            "Upload-Metadata": f"filename {base64.b64encode(b'bericht.txt').decode()}",
        },
        timeout=30,
    )
    assert created.status_code == 201
    url = deployment.base + created.headers["Location"]
    # 25 whole bodies at offset 0, each different; 15 empty PATCHes at the end offset (a
    # retried last piece); 10 empty ones at offset 0.
    bodies = [text_content(LENGTH, seed=f"client {n} ") for n in range(25)]
    requests_ = [(0, body) for body in bodies] + [(LENGTH, b"")] * 15 + [(0, b"")] * 10
    start = threading.Barrier(len(requests_))

    def send(offset_body: tuple[int, bytes]) -> requests.Response:
        offset, body = offset_body
        start.wait()
        return requests.patch(
            url,
            data=body,
            headers={
                **TUS,
                **auth,
                "Upload-Offset": str(offset),
                "Content-Type": OFFSET_TYPE,
            },
            timeout=120,
        )

    with ThreadPoolExecutor(len(requests_)) as pool:
        answers = list(pool.map(send, requests_))

    statuses = sorted({a.status_code for a in answers})
    assert set(statuses) <= {204, 409}, [(a.status_code, a.text) for a in answers]
    finished = [
        (body, a)
        for (_, body), a in zip(requests_, answers, strict=True)
        if "Upload-Record-Id" in a.headers and a.status_code == 204
    ]
    assert len(finished) == 1, statuses
    [(winner, answer)] = finished
    record_id = answer.headers["Upload-Record-Id"]
    record = deployment.record(record_id)
    assert record["size"] == LENGTH
    download = requests.get(
        f"{deployment.base}/api/files/{record_id}/download", headers=auth, timeout=60
    )
    assert download.status_code == 200
    assert download.content == winner
    assert download.headers["ETag"].strip('"') == hashlib.sha256(winner).hexdigest()
    [(stored_path, checksum)] = rows(
        deployment,
        "SELECT stored_path, checksum_sha256 FROM file_records WHERE id = :id OR id = :hex",
        id=record_id,
        hex=record_id.replace("-", ""),
    )
    assert checksum == hashlib.sha256(winner).hexdigest()
    # Exactly one new object, the record's; no piece, no multipart upload, no other row.
    assert stored_objects(deployment) - before == {stored_path}
    assert leftovers(deployment) == []
    state = requests.head(url, headers={**TUS, **auth}, timeout=30)
    assert state.status_code == 200 and state.headers["Upload-Record-Id"] == record_id
    assert "Content-Type" not in state.headers  # a HEAD through waitress too (issue 20)
    uploads = rows(
        deployment,
        'SELECT r."offset", r.completed_at IS NOT NULL, r.claim IS NULL FROM resumable_uploads r '
        "JOIN users u ON u.id = r.user_id WHERE u.email = :email",
        email=deployment.names["alice@example.org"],
    )
    assert [tuple(r) for r in uploads] == [(LENGTH, True, True)]


#: Creations sent at once for a user one below the limit (the server's threads are 8).
CREATORS = 8


def test_creations_at_once_never_pass_the_limit_of_unfinished_uploads(deployment: Deployment):
    auth = deployment.auth()
    limit = 20  # UPLOAD_MAX_UNFINISHED's default, which the deployment keeps
    pieces_before = leftovers(deployment)
    headers = {
        **TUS,
        **auth,
        "Upload-Length": "10",
        "Upload-Metadata": f"filename {base64.b64encode(b'bericht.txt').decode()}",
    }

    def create() -> requests.Response:
        return requests.post(deployment.endpoint, headers=headers, timeout=60)

    locations = []
    for _ in range(limit - 1):
        created = create()
        assert created.status_code == 201, created.text
        locations.append(created.headers["Location"])
    start = threading.Barrier(CREATORS)

    def create_at_once(_: int) -> requests.Response:
        start.wait()
        return create()

    with ThreadPoolExecutor(CREATORS) as pool:
        answers = list(pool.map(create_at_once, range(CREATORS)))

    statuses = sorted(a.status_code for a in answers)
    assert statuses == [201] + [429] * (CREATORS - 1), [(a.status_code, a.text) for a in answers]
    for refused in (a for a in answers if a.status_code == 429):
        assert refused.json()["message"] == (
            f"You have {limit} unfinished uploads, the most allowed: finish or terminate "
            "(DELETE) one of them before starting another."
        )
        assert int(refused.headers["Retry-After"]) > 0
    locations += [a.headers["Location"] for a in answers if a.status_code == 201]
    unfinished = rows(
        deployment,
        "SELECT count(*) FROM resumable_uploads r JOIN users u ON u.id = r.user_id "
        "WHERE u.email = :email AND r.completed_at IS NULL",
        email=deployment.names["alice@example.org"],
    )
    assert unfinished[0][0] == limit
    # The refused creations left no pieces behind; the live ones go with their uploads.
    assert len(set(leftovers(deployment)) - set(pieces_before)) == limit
    for location in locations:
        gone = requests.delete(deployment.base + location, headers={**TUS, **auth}, timeout=30)
        assert gone.status_code == 204, gone.text
    assert leftovers(deployment) == pieces_before
