"""Shared helpers for the detection tests."""

from __future__ import annotations

import pytest

from app.detection import Sample, UnsupportedFileType, detect_mime_type


def detect(data: bytes, filename: str | None = None) -> str:
    """Detect exactly as an upload would: from the bounded sample of the bytes."""
    return detect_mime_type(Sample.from_bytes(data), filename)


def rejection(data: bytes, filename: str | None = None) -> str:
    """The reason detection gives for refusing ``data``; fails the test if it is accepted."""
    with pytest.raises(UnsupportedFileType) as caught:
        detect(data, filename)
    reason = caught.value.reason
    assert reason and reason.endswith(".")
    return reason
