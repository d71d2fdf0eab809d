"""Pick and build the storage backend from the application's settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.config import S3_DEFAULTS

from .base import Storage

BACKENDS = ("local", "s3")


def _setting(config: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """A setting, with empty strings (unset environment variables) treated as absent."""
    value = config.get(name, default)
    return default if value is None or value == "" else value


def _number(config: Mapping[str, Any], name: str, kind: type = int) -> Any:
    """An S3 setting (declared with its default in app/config.py), checked."""
    value = _setting(config, name, S3_DEFAULTS[name])
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if number <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return number


def create_storage(config: Mapping[str, Any]) -> Storage:
    """Build the configured backend without touching the network or the disk.

    A missing or wrong setting raises ``ValueError`` whose message names the setting, so
    start-up can stop with one clear line. Reachability is ``Storage.check()``'s job.
    """
    backend = str(_setting(config, "STORAGE_BACKEND", "local")).strip().lower()
    if backend == "local":
        from .local import LocalStorage

        root = _setting(config, "STORAGE_LOCAL_ROOT")
        if root is None:
            raise ValueError("STORAGE_LOCAL_ROOT must be set when STORAGE_BACKEND is 'local'")
        return LocalStorage(root)
    if backend == "s3":
        from .s3 import MIN_PART_SIZE, S3Storage, build_s3_client

        bucket = _setting(config, "S3_BUCKET")
        if bucket is None:
            raise ValueError("S3_BUCKET must be set when STORAGE_BACKEND is 's3'")
        part_size = _number(config, "S3_PART_SIZE")
        if part_size < MIN_PART_SIZE:
            raise ValueError(f"S3_PART_SIZE must be at least {MIN_PART_SIZE} bytes (S3's minimum)")
        addressing_style = _setting(config, "S3_ADDRESSING_STYLE")
        if addressing_style not in (None, "path", "virtual", "auto"):
            raise ValueError(
                f"S3_ADDRESSING_STYLE must be 'path', 'virtual' or 'auto', got {addressing_style!r}"
            )
        client = build_s3_client(
            endpoint_url=_setting(config, "S3_ENDPOINT_URL"),
            region=_setting(config, "S3_REGION"),
            addressing_style=addressing_style,
            connect_timeout=_number(config, "S3_CONNECT_TIMEOUT", float),
            read_timeout=_number(config, "S3_READ_TIMEOUT", float),
            max_attempts=_number(config, "S3_MAX_ATTEMPTS"),
            max_pool_connections=_number(config, "S3_MAX_POOL_CONNECTIONS"),
        )
        parts_in_flight = _number(config, "S3_PARTS_IN_FLIGHT")
        if parts_in_flight < 1:
            raise ValueError(f"S3_PARTS_IN_FLIGHT must be at least 1, got {parts_in_flight}")
        return S3Storage(
            client,
            str(bucket),
            part_size=part_size,
            parts_in_flight=parts_in_flight,
        )
    raise ValueError(f"STORAGE_BACKEND must be one of {', '.join(BACKENDS)}, got {backend!r}")
