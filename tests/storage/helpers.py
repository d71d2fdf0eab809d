"""Helpers the storage test modules import (conftest is for fixtures only)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.storage import LocalStorage, Storage
from app.storage.base import MiB
from app.storage.local import TMP_DIR
from app.storage.s3 import S3Storage

BUCKET = "test-bucket"
#: The smallest part S3 accepts; keeps the multipart tests quick.
TEST_PART_SIZE = 5 * MiB


def use_credentials(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, access_key: str, secret_key: str
) -> None:
    """Credentials through boto3's usual chain (the environment), with no ~/.aws files."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret_key)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)


def pending_uploads(storage: Storage) -> list[str]:
    """Writes in progress that a backend still holds: temp files or open multipart uploads."""
    if isinstance(storage, LocalStorage):
        tmp_dir = storage.root / TMP_DIR
        return sorted(os.listdir(tmp_dir)) if tmp_dir.is_dir() else []
    if isinstance(storage, S3Storage):
        response = storage.client.list_multipart_uploads(Bucket=storage.bucket)
        return [upload["Key"] for upload in response.get("Uploads", [])]
    raise TypeError(f"unknown storage {storage!r}")
