"""``create_storage``: settings pick and shape the backend; nothing is contacted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.storage import LocalStorage, Storage, create_storage
from app.storage.base import DEFAULT_CHUNK_SIZE, MiB
from app.storage.s3 import S3Storage


@pytest.fixture
def make_storage() -> Iterator[Any]:
    """``create_storage`` that closes what it built."""
    built: list[Storage] = []

    def make(config: dict[str, Any]) -> Storage:
        storage = create_storage(config)
        built.append(storage)
        return storage

    yield make
    for storage in built:
        storage.close()


def test_local_is_the_default(tmp_path: Path, make_storage: Any) -> None:
    storage = make_storage({"STORAGE_LOCAL_ROOT": str(tmp_path / "objects")})
    assert isinstance(storage, LocalStorage)
    assert storage.root == tmp_path / "objects"
    assert storage.chunk_size == DEFAULT_CHUNK_SIZE
    assert not (tmp_path / "objects").exists()  # created on first use, not at start-up


def test_s3_with_an_endpoint(aws_credentials: None, make_storage: Any) -> None:
    began = time.monotonic()
    storage = make_storage(
        {
            "STORAGE_BACKEND": "s3",
            "S3_BUCKET": "files",
            # Nothing listens here: building the storage must not try to connect.
            "S3_ENDPOINT_URL": "http://127.0.0.1:9",
            "S3_REGION": "eu-central-1",
            "S3_PART_SIZE": str(16 * MiB),
            "S3_PARTS_IN_FLIGHT": "3",
            "S3_CONNECT_TIMEOUT": "2",
            "S3_READ_TIMEOUT": "30",
        }
    )
    assert time.monotonic() - began < 2
    assert isinstance(storage, S3Storage)
    assert storage.bucket == "files"
    assert storage.part_size == 16 * MiB
    assert storage.parts_in_flight == 3
    assert storage.endpoint_url == "http://127.0.0.1:9"
    config = storage.client.meta.config
    assert storage.client.meta.region_name == "eu-central-1"
    assert config.s3["addressing_style"] == "path"
    assert config.retries == {"mode": "standard", "total_max_attempts": 3}
    assert config.max_pool_connections == 20
    assert (config.connect_timeout, config.read_timeout) == (2.0, 30.0)
    # Plain HTTP: bodies unsigned but with a CRC32 the server checks.
    assert config.s3["payload_signing_enabled"] is False
    assert config.request_checksum_calculation == "when_supported"


def test_s3_on_aws_keeps_botocore_defaults(aws_credentials: None, make_storage: Any) -> None:
    storage = make_storage({"STORAGE_BACKEND": "s3", "S3_BUCKET": "files", "S3_ENDPOINT_URL": ""})
    assert storage.part_size == 5 * MiB
    assert storage.single_put_limit == 8 * MiB
    assert storage.parts_in_flight == 2
    assert "amazonaws.com" in storage.endpoint_url
    assert not (storage.client.meta.config.s3 or {}).get("addressing_style")
    # TLS checks the bodies: no second checksum pass over them.
    assert storage.client.meta.config.request_checksum_calculation == "when_required"


@pytest.mark.parametrize(
    ("config", "setting"),
    [
        ({"STORAGE_BACKEND": "ftp"}, "STORAGE_BACKEND"),
        ({"STORAGE_BACKEND": "local"}, "STORAGE_LOCAL_ROOT"),
        ({"STORAGE_BACKEND": "s3"}, "S3_BUCKET"),
        ({"STORAGE_BACKEND": "s3", "S3_BUCKET": "b", "S3_PART_SIZE": "1024"}, "S3_PART_SIZE"),
        ({"STORAGE_BACKEND": "s3", "S3_BUCKET": "b", "S3_PART_SIZE": "big"}, "S3_PART_SIZE"),
        ({"STORAGE_BACKEND": "s3", "S3_BUCKET": "b", "S3_READ_TIMEOUT": "0"}, "S3_READ_TIMEOUT"),
        (
            {"STORAGE_BACKEND": "s3", "S3_BUCKET": "b", "S3_PARTS_IN_FLIGHT": "0"},
            "S3_PARTS_IN_FLIGHT",
        ),
        (
            {"STORAGE_BACKEND": "s3", "S3_BUCKET": "b", "S3_ADDRESSING_STYLE": "odd"},
            "S3_ADDRESSING_STYLE",
        ),
    ],
)
def test_wrong_settings_name_the_setting(
    aws_credentials: None, config: dict[str, Any], setting: str
) -> None:
    with pytest.raises(ValueError, match=setting):
        create_storage(config)
