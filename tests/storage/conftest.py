"""Fixtures for the storage tests: the same interface over a local folder and a mocked S3."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.storage import LocalStorage, Storage
from app.storage.s3 import S3Storage, build_s3_client

from .helpers import BUCKET, TEST_PART_SIZE, use_credentials


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Fake credentials, so nothing can reach a real account."""
    use_credentials(monkeypatch, tmp_path, "testing", "testing")


@pytest.fixture
def local_storage(tmp_path: Path) -> LocalStorage:
    return LocalStorage(tmp_path / "storage")


@pytest.fixture
def moto_s3(aws_credentials: None) -> Iterator[None]:
    from moto import mock_aws

    with mock_aws():
        yield


@pytest.fixture
def s3_storage(moto_s3: None) -> Iterator[S3Storage]:
    client = build_s3_client(region="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    storage = S3Storage(client, BUCKET, part_size=TEST_PART_SIZE)
    yield storage
    storage.close()


@pytest.fixture(params=["local", "s3"])
def storage(request: pytest.FixtureRequest) -> Storage:
    """Each interface test runs once per backend."""
    return request.getfixturevalue(f"{request.param}_storage")
