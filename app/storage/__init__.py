"""Where file contents live: a small interface with a local-folder and an S3 implementation."""

from .base import (
    DEFAULT_CHUNK_SIZE,
    WRITE_PROBE_KEY,
    InvalidRange,
    ObjectNotFound,
    ObjectReader,
    ObjectWriter,
    Storage,
    StorageError,
    StorageUnavailable,
    StoredObject,
    UnfinishedUpload,
    validate_key,
)
from .factory import create_storage
from .local import LocalStorage

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "InvalidRange",
    "LocalStorage",
    "ObjectNotFound",
    "ObjectReader",
    "ObjectWriter",
    "Storage",
    "StorageError",
    "StorageUnavailable",
    "StoredObject",
    "UnfinishedUpload",
    "WRITE_PROBE_KEY",
    "create_storage",
    "validate_key",
]
