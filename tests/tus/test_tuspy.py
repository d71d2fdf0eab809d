"""tus uploads with tuspy, the tus project's Python client, against a real server on both
stacks: chunks, checksums, pausing and resuming after a killed connection and a restart."""

from __future__ import annotations

import base64
import hashlib
import io
import socket

import pytest
import requests
from tusclient import client as tus
from tusclient.exceptions import TusCommunicationError, TusUploadFailed

from tests.tus.conftest import Deployment, MiB, text_content

TUS = {"Tus-Resumable": "1.0.0"}


def uploader(deployment: Deployment, data: bytes, chunk_size: int, url=None, **metadata):
    client = tus.TusClient(deployment.endpoint, headers=deployment.auth())
    metadata.setdefault("filename", "bericht.txt")
    return client.uploader(
        file_stream=io.BytesIO(data),
        chunk_size=chunk_size,
        metadata=metadata,
        upload_checksum=True,
        url=url,
    )


def leftovers(deployment: Deployment) -> list[str]:
    """Pieces of uploads still kept by the backend (not finished objects)."""
    if deployment.stack == "sqlite-local":
        root = deployment.tmp_path / "storage" / "uploads"
        return sorted(str(p) for p in root.rglob("*") if p.is_file()) if root.exists() else []
    import boto3

    env = deployment.env
    s3 = boto3.client(
        "s3",
        endpoint_url=env["S3_ENDPOINT_URL"],
        region_name=env["S3_REGION"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )
    bucket = env["S3_BUCKET"]
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    pending = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    return sorted([k for k in keys if k.startswith("uploads/")] + [u["Key"] for u in pending])


def head(deployment: Deployment, url: str, email: str = "alice@example.org") -> requests.Response:
    return requests.head(url, headers={**TUS, **deployment.auth(email)}, timeout=30)


def test_upload_in_chunks_becomes_a_record_with_its_metadata(deployment: Deployment):
    data = text_content(12 * MiB + 12345)
    up = uploader(
        deployment, data, 3 * MiB, titel="Jahresbericht", path="reports/2026", reihenfolge="3"
    )
    up.upload()
    headers = up.request.response_headers
    record_id = headers["upload-record-id"]
    assert headers["location"] == f"/api/files/{record_id}"
    record = deployment.record(record_id)
    assert record["original_name"] == "bericht.txt"
    assert record["titel"] == "Jahresbericht" and record["path"] == "reports/2026"
    assert record["reihenfolge"] == 3 and record["freigabe"] is True
    assert record["mime_type"] == "text/plain" and record["size"] == len(data)
    assert deployment.download(record_id) == data
    # A late HEAD still tells where the file went.
    state = head(deployment, up.url)
    assert state.status_code == 200
    assert state.headers["Upload-Offset"] == str(len(data))
    assert state.headers["Upload-Record-Id"] == record_id
    assert leftovers(deployment) == []
    verify = deployment.flask("storage", "verify", "--record", record_id)
    assert verify.returncode == 0, verify.stdout


def _cut_off_patch(deployment: Deployment, url: str, offset: int, piece: bytes) -> None:
    """Half of a PATCH body, then the connection drops."""
    path = url.split(str(deployment.port), 1)[1]
    with socket.create_connection(("127.0.0.1", deployment.port)) as sock:
        sock.sendall(
            (
                f"PATCH {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nTus-Resumable: 1.0.0\r\n"
                f"Authorization: {deployment.auth()['Authorization']}\r\n"
                f"Content-Type: application/offset+octet-stream\r\nUpload-Offset: {offset}\r\n"
                f"Content-Length: {len(piece)}\r\n\r\n"
            ).encode()
            + piece[: len(piece) // 2]
        )


def test_resume_after_a_killed_connection(deployment: Deployment):
    data = text_content(20 * MiB, seed="killed")
    chunk = 6 * MiB
    up = uploader(deployment, data, chunk)
    up.upload(stop_at=2 * chunk)
    assert up.offset == 2 * chunk
    _cut_off_patch(deployment, up.url, up.offset, data[up.offset : up.offset + chunk])
    assert head(deployment, up.url).headers["Upload-Offset"] == str(2 * chunk)
    resumed = uploader(deployment, data, chunk, url=up.url)
    assert resumed.offset == 2 * chunk
    resumed.upload()
    record_id = resumed.request.response_headers["upload-record-id"]
    assert deployment.download(record_id) == data
    assert [r["id"] for r in deployment.records()] == [record_id]
    assert leftovers(deployment) == []


def test_resume_after_a_server_restart(deployment: Deployment):
    data = text_content(16 * MiB + 7, seed="restart")
    chunk = 4 * MiB
    up = uploader(deployment, data, chunk, titel="Nach dem Neustart")
    up.upload(stop_at=chunk * 3)
    path = up.url.split(str(deployment.port), 1)[1]
    deployment.stop(kill=True)
    deployment.start()  # another process, another port: nothing was kept in memory
    resumed = uploader(deployment, data, chunk, url=deployment.base + path)
    assert resumed.offset == chunk * 3
    resumed.upload()
    record_id = resumed.request.response_headers["upload-record-id"]
    assert deployment.download(record_id) == data
    record = deployment.record(record_id)
    assert record["titel"] == "Nach dem Neustart"
    # The SHA-256 was worked out again from the stored bytes.
    verify = deployment.flask("storage", "verify", "--record", record_id)
    assert verify.returncode == 0, verify.stdout


def _multipart_422(deployment: Deployment, **fields: str) -> dict:
    response = requests.post(
        f"{deployment.base}/api/files",
        headers=deployment.auth(),
        files={"files[]": ("bericht.txt", b"some text\n")},
        data=fields,
        timeout=30,
    )
    assert response.status_code == 422
    return response.json()


def test_metadata_is_checked_like_post_before_any_byte(deployment: Deployment):
    bad = {"sperrfrist": "2026-02-30", "freigabe": "vielleicht", "reihenfolge": "x"}
    up = uploader(deployment, b"text\n", MiB, **bad)
    with pytest.raises(TusCommunicationError) as failure:
        up.upload()
    assert failure.value.status_code == 422
    import json

    assert json.loads(failure.value.response_content) == _multipart_422(deployment, **bad)
    assert deployment.records() == [] and leftovers(deployment) == []


def test_rejected_type_stores_nothing(deployment: Deployment):
    data = b"MZ\x90\x00" + bytes(range(256)) * 4096
    up = uploader(deployment, data, 512 * 1024, filename="tool.pdf")
    with pytest.raises(TusUploadFailed) as failure:
        up.upload()
    assert failure.value.status_code == 422
    assert b"The file field must be a file of type" in failure.value.response_content
    assert deployment.records() == [] and leftovers(deployment) == []
    assert head(deployment, up.url).status_code == 404


def test_only_the_owner_sees_or_continues_an_upload(deployment: Deployment):
    data = text_content(MiB)
    up = uploader(deployment, data, 256 * 1024)
    up.upload(stop_at=256 * 1024)
    for email in ("bob@example.org", "admin@example.org"):
        other = {**TUS, **deployment.auth(email)}
        assert requests.head(up.url, headers=other, timeout=30).status_code == 404
        patch = requests.patch(
            up.url,
            data=data[256 * 1024 :],
            headers={
                **other,
                "Upload-Offset": str(256 * 1024),
                "Content-Type": "application/offset+octet-stream",
            },
            timeout=30,
        )
        assert patch.status_code == 404
        assert requests.delete(up.url, headers=other, timeout=30).status_code == 404
    assert requests.head(up.url, headers=TUS, timeout=30).status_code == 401
    up.upload()
    assert deployment.download(up.request.response_headers["upload-record-id"]) == data


def test_checksum_mismatch_is_460_and_changes_nothing(deployment: Deployment):
    up = uploader(deployment, text_content(MiB), MiB)
    up.set_url(up.create_url())
    wrong = base64.b64encode(hashlib.sha1(b"other").digest()).decode()
    response = requests.patch(
        up.url,
        data=text_content(MiB),
        headers={
            **TUS,
            **deployment.auth(),
            "Upload-Offset": "0",
            "Content-Type": "application/offset+octet-stream",
            "Upload-Checksum": f"sha1 {wrong}",
        },
        timeout=30,
    )
    assert response.status_code == 460
    assert head(deployment, up.url).headers["Upload-Offset"] == "0"
    right = base64.b64encode(hashlib.sha256(text_content(MiB)).digest()).decode()
    response = requests.patch(
        up.url,
        data=text_content(MiB),
        headers={
            **TUS,
            **deployment.auth(),
            "Upload-Offset": "0",
            "Content-Type": "application/offset+octet-stream",
            "Upload-Checksum": f"sha256 {right}",
        },
        timeout=30,
    )
    assert response.status_code == 204, response.text
    assert deployment.download(response.headers["Upload-Record-Id"]) == text_content(MiB)


def test_termination_removes_the_pieces(deployment: Deployment):
    up = uploader(deployment, text_content(7 * MiB), 6 * MiB)
    up.upload(stop_at=6 * MiB)
    assert leftovers(deployment) != []
    response = requests.delete(up.url, headers={**TUS, **deployment.auth()}, timeout=30)
    assert response.status_code == 204
    assert head(deployment, up.url).status_code == 404
    assert leftovers(deployment) == [] and deployment.records() == []


def test_expired_uploads_are_aborted_by_reconcile(deployment: Deployment):
    live = uploader(deployment, text_content(8 * MiB, seed="live"), 6 * MiB)
    live.upload(stop_at=6 * MiB)
    old = uploader(deployment, text_content(8 * MiB, seed="old"), 6 * MiB)
    old.upload(stop_at=6 * MiB)
    _sql(deployment, "UPDATE resumable_uploads SET expires_at = :past", old.url)
    assert head(deployment, old.url).status_code == 410
    # An upload whose row went (with its account, say) leaves pieces without an owner.
    lost = uploader(deployment, text_content(3 * MiB, seed="lost"), 2 * MiB)
    lost.upload(stop_at=2 * MiB)
    _sql(deployment, "DELETE FROM resumable_uploads", lost.url)
    result = deployment.flask("storage", "reconcile", "--fix", "--grace-minutes", "0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "expired resumable uploads aborted: 1" in result.stdout
    assert "pieces without an upload removed: 1" in result.stdout
    assert head(deployment, old.url).status_code == 404
    # The live upload lost nothing, although its multipart upload is older than the grace.
    live.upload()
    record_id = live.request.response_headers["upload-record-id"]
    assert deployment.download(record_id) == text_content(8 * MiB, seed="live")
    assert leftovers(deployment) == []


def _sql(deployment: Deployment, statement: str, url: str) -> None:
    """`statement` on the row of the upload at `url` (whichever way the database keeps UUIDs)."""
    import sqlalchemy as sa

    upload_id = url.rsplit("/", 1)[1]
    engine = sa.create_engine(deployment.env["DATABASE_URL"])
    with engine.begin() as conn:
        conn.execute(
            sa.text(f"{statement} WHERE id = :id OR id = :hex"),
            {"past": "2000-01-01 00:00:00", "id": upload_id, "hex": upload_id.replace("-", "")},
        )
    engine.dispose()


def test_discovery_and_creation_with_upload(deployment: Deployment):
    options = requests.options(deployment.endpoint, timeout=30)
    assert options.status_code == 204
    assert options.headers["Tus-Version"] == "1.0.0"
    assert set(options.headers["Tus-Extension"].split(",")) == {
        "creation",
        "creation-with-upload",
        "termination",
        "checksum",
        "expiration",
    }
    assert options.headers["Tus-Max-Size"] == str(200 * MiB)
    assert options.headers["Tus-Checksum-Algorithm"] == "sha1,sha256"
    data = b"a;b\n1;2\n"
    response = requests.post(
        deployment.endpoint,
        data=data,
        headers={
            **TUS,
            **deployment.auth(),
            "Upload-Length": str(len(data)),
            "Upload-Metadata": "filename " + base64.b64encode(b"t.csv").decode(),
            "Content-Type": "application/offset+octet-stream",
        },
        timeout=30,
    )
    assert response.status_code == 201, response.text
    assert response.headers["Upload-Offset"] == str(len(data))
    assert response.headers["Location"].startswith("/api/uploads/")
    record = deployment.record(response.headers["Upload-Record-Id"])
    assert record["mime_type"] == "text/csv" and record["original_name"] == "t.csv"
    too_big = requests.post(
        deployment.endpoint,
        headers={**TUS, **deployment.auth(), "Upload-Length": str(200 * MiB + 1)},
        timeout=30,
    )
    assert too_big.status_code == 413
    no_version = requests.post(
        deployment.endpoint, headers={**deployment.auth(), "Upload-Length": "5"}, timeout=30
    )
    assert no_version.status_code == 412 and no_version.headers["Tus-Version"] == "1.0.0"


@pytest.mark.slow
def test_200_mib_in_8_mib_chunks_ends_byte_identical(deployment: Deployment):
    data = text_content(200 * MiB, seed="big")
    up = uploader(deployment, data, 8 * MiB)
    up.upload()
    record_id = up.request.response_headers["upload-record-id"]
    record = deployment.record(record_id)
    assert record["size"] == 200 * MiB
    downloaded = deployment.download(record_id)
    assert hashlib.sha256(downloaded).digest() == hashlib.sha256(data).digest()
    assert leftovers(deployment) == []


@pytest.mark.parametrize(
    "server",
    [pytest.param("postgres-s3", marks=[pytest.mark.postgres, pytest.mark.s3server])],
    indirect=True,
)
def test_pieces_may_go_to_any_replica(deployment: Deployment):
    """Two servers on one database and bucket (replicas behind a load balancer): every other
    piece goes to the other one, so neither sees the whole file pass by."""
    other = Deployment(deployment.env, deployment.tmp_path, deployment.stack)
    other.names, other.tokens = deployment.names, deployment.tokens
    other.start()
    try:
        data = text_content(17 * MiB + 3, seed="replicas")
        chunk = 3 * MiB
        up = uploader(deployment, data, chunk, titel="Zwei Server")
        up.upload(stop_at=chunk)
        path = up.url.split(str(deployment.port), 1)[1]
        servers = [other, deployment]
        turn = 0
        while up.offset < len(data):
            base = servers[turn % 2].base
            up = uploader(deployment, data, chunk, url=base + path, titel="Zwei Server")
            up.upload_chunk()
            turn += 1
        record_id = up.request.response_headers["upload-record-id"]
        assert deployment.download(record_id) == data
        assert other.record(record_id)["titel"] == "Zwei Server"
        verify = deployment.flask("storage", "verify", "--record", record_id)
        assert verify.returncode == 0, verify.stdout
        assert leftovers(deployment) == []
    finally:
        other.stop()
