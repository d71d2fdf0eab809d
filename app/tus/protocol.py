"""What the tus 1.0.0 protocol says on the wire: the version and extensions spoken, the
refusals with the status each gets, and the parsing of its headers."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable
from typing import Any

from app.exceptions import DomainError
from app.files.uploads import clean_file_name

TUS_VERSION = "1.0.0"
EXTENSIONS = "creation,creation-with-upload,termination,checksum,expiration"
CHECKSUMS: dict[str, Callable[[], Any]] = {"sha1": hashlib.sha1, "sha256": hashlib.sha256}
#: The field name of the file in error messages, as for a content replacement.
FILE_FIELD = "file"
#: Header values longer than this are not byte counts this server could take.
MAX_DIGITS = 18


class TusError(DomainError):
    """A request the protocol answers with a status of its own (and headers, if any)."""

    status = 400

    def __init__(self, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.headers = headers or {}


class OffsetMismatch(TusError):
    status = 409


class UploadGone(TusError):
    status = 410


class TooLarge(TusError):
    status = 413


class UploadLocked(TusError):
    """Another request is writing this upload (tusd answers the same)."""

    status = 423


class TooManyUploads(TusError):
    status = 429


class ChecksumMismatch(TusError):
    status = 460


class UnsupportedChecksum(TusError):
    status = 400


class UnsupportedMediaType(TusError):
    status = 415


def whole_number(name: str, raw: str | None) -> int:
    """A byte count as tus writes it: ASCII digits only (`²` and other Unicode digits pass
    `str.isdigit()` but are not numbers `int()` reads)."""
    raw = raw or ""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > MAX_DIGITS:
        raise TusError(f"{name} must be a whole number of bytes.")
    return int(raw)


def parse_metadata(header: str) -> tuple[dict[str, str], dict[str, list[str]]]:
    """`key base64(value)` pairs, comma-separated; a value that is not UTF-8 is a field error
    with the message of a form field that is not UTF-8."""
    fields: dict[str, str] = {}
    errors: dict[str, list[str]] = {}
    for pair in filter(None, (p.strip() for p in header.split(","))):
        key, _, encoded = pair.partition(" ")
        try:
            raw = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise TusError(f"Upload-Metadata: the value of {key!r} is not base64.") from None
        try:
            fields[key] = raw.decode("utf-8")
        except UnicodeDecodeError:
            errors[key] = [f"The {key} field must be UTF-8 text."]
    return fields, errors


def file_name(fields: dict[str, str]) -> str:
    """tus-js-client and Uppy send `filename` (Uppy also `name`)."""
    return clean_file_name(fields.get("filename") or fields.get("name"))
