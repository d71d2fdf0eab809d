"""The storage contract against a real S3 server (SeaweedFS), plus what only a real server shows."""

from __future__ import annotations

import http.client
import io
import logging
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from app.storage import StorageUnavailable, create_storage
from app.storage.base import MiB
from app.storage.s3 import S3Storage
from tests.support.seaweedfs import SeaweedFS, start_seaweedfs

from .contract import AbandonedUploadsContract, StorageContract, chunked, digest
from .helpers import TEST_PART_SIZE, pending_uploads, use_credentials

pytestmark = pytest.mark.s3server


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    server = start_seaweedfs(tmp_path_factory.mktemp("seaweedfs"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def admin_client(seaweedfs: SeaweedFS) -> Iterator[Any]:
    client = seaweedfs.client()
    yield client
    client.close()


@pytest.fixture
def bucket(admin_client: Any) -> Iterator[str]:
    """A fresh bucket per test, removed with whatever the test left in it."""
    name = f"test-{uuid.uuid4().hex[:16]}"
    admin_client.create_bucket(Bucket=name)
    yield name
    for page in admin_client.get_paginator("list_objects_v2").paginate(Bucket=name):
        for item in page.get("Contents", ()):
            admin_client.delete_object(Bucket=name, Key=item["Key"])
    admin_client.delete_bucket(Bucket=name)


@pytest.fixture
def server_credentials(
    seaweedfs: SeaweedFS, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The server's admin identity, through boto3's usual chain as in production."""
    use_credentials(monkeypatch, tmp_path, seaweedfs.access_key, seaweedfs.secret_key)


@pytest.fixture
def storage(seaweedfs: SeaweedFS, bucket: str, server_credentials: None) -> Iterator[S3Storage]:
    config = seaweedfs.storage_config(bucket) | {"S3_PART_SIZE": TEST_PART_SIZE}
    storage = create_storage(config)
    assert isinstance(storage, S3Storage)
    yield storage
    storage.close()


class TestSeaweedFSContract(StorageContract, AbandonedUploadsContract):
    """Every contract test against the real server."""


def anonymous_get(endpoint_url: str, path: str) -> int:
    """An unsigned GET, as a browser or curl would send it."""
    url = urlsplit(endpoint_url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def test_anonymous_requests_are_refused(seaweedfs: SeaweedFS, storage: S3Storage) -> None:
    key = "files/3f2b8c1e/9d7e6a52"
    storage.put(key, io.BytesIO(b"private content"))

    assert anonymous_get(seaweedfs.endpoint_url, f"/{storage.bucket}/{key}") in (401, 403)
    assert anonymous_get(seaweedfs.endpoint_url, f"/{storage.bucket}") in (401, 403)
    assert anonymous_get(seaweedfs.endpoint_url, "/") in (401, 403)


def test_multipart_with_real_part_sizes_is_byte_exact(storage: S3Storage) -> None:
    key = "files/big/object"
    data = os.urandom(16 * MiB)
    sent: list[tuple[str, bytes]] = []

    def note(request: Any, **_: Any) -> None:
        crc = request.headers.get("x-amz-checksum-crc32") is not None
        sent.append((request.method, request.headers.get("x-amz-content-sha256"), crc))

    # Bodies go up unsigned (no second SHA-256 pass in the app) but with a CRC32 over plain
    # HTTP, and the server takes that.
    storage.client.meta.events.register("before-send.s3.UploadPart", note)
    with storage.writer(key) as writer:
        for chunk in chunked(data, 256 * 1024 + 1):
            writer.write(chunk)
            bound = storage.single_put_limit + storage.part_size * storage.parts_in_flight
            assert writer.buffered <= bound
        writer.commit()

    head = storage.client.head_object(Bucket=storage.bucket, Key=key)
    assert head["ContentLength"] == 16 * MiB
    # The first part is the single-PUT limit (8 MiB), the others part_size: 8 + 5 + 3 MiB.
    assert head["ETag"].strip('"').endswith("-3")
    assert pending_uploads(storage) == []
    with storage.open(key) as reader:
        assert digest(b"".join(reader)) == digest(data)
    assert sent == [("PUT", b"UNSIGNED-PAYLOAD", True)] * 3


def test_wrong_credentials_are_reported_by_check(
    seaweedfs: SeaweedFS, bucket: str, server_credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    storage = create_storage(seaweedfs.storage_config(bucket))
    try:
        with pytest.raises(StorageUnavailable, match="access denied"):
            storage.check()
        with pytest.raises(StorageUnavailable):
            storage.open("files/any/key")
    finally:
        storage.close()


def test_missing_bucket_is_reported_by_check(
    seaweedfs: SeaweedFS, server_credentials: None
) -> None:
    storage = create_storage(seaweedfs.storage_config("no-such-bucket"))
    try:
        with pytest.raises(StorageUnavailable, match="does not exist"):
            storage.check()
    finally:
        storage.close()


def test_reads_reuse_their_connection_and_an_early_close_drops_it(
    storage: S3Storage, caplog: pytest.LogCaptureFixture
) -> None:
    data = os.urandom(3 * MiB)
    storage.put("files/a/b", io.BytesIO(data))
    with storage.open("files/a/b") as reader:  # the connection the reads below may reuse
        assert reader.read_all() == data

    caplog.set_level(logging.DEBUG, logger="urllib3.connectionpool")
    for start in (0, MiB, 2 * MiB - 7):
        with storage.open("files/a/b", start, start + MiB - 1) as reader:
            assert reader.read_all() == data[start : start + MiB]
    assert "Starting new HTTP connection" not in caplog.text

    reader = storage.open("files/a/b")
    next(iter(reader))
    reader.close()  # mid-body: the connection cannot go back to the pool
    with storage.open("files/a/b", 5, 9) as reader:
        assert reader.read_all() == data[5:10]
    assert caplog.text.count("Starting new HTTP connection") == 1


def test_the_offload_location_reads_the_object_without_credentials(
    seaweedfs: SeaweedFS, storage: S3Storage
) -> None:
    """What nginx sends for DOWNLOAD_OFFLOAD: the location after the endpoint, and a Range."""
    key = "files/5a1c/0e2f"
    data = os.urandom(3 * MiB)
    storage.put(key, io.BytesIO(data))
    location = storage.offload_location(key)
    assert location.startswith(f"{storage.bucket}/{key}?")
    url = urlsplit(seaweedfs.endpoint_url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        connection.request("GET", f"/{location}", headers={"Range": "bytes=100-199"})
        response = connection.getresponse()
        assert (response.status, response.read()) == (206, data[100:200])
    finally:
        connection.close()
