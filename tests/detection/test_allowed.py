"""Every allowed type is recognised from its bytes, whatever the client calls the file."""

from __future__ import annotations

import pytest

from app.detection import ALLOWED_MIME_TYPES
from tests.support import samples
from tests.support.samples import AllowedSample

from .helpers import detect

ALLOWED = samples.allowed_samples()
BINARY = [
    sample for sample in ALLOWED if not sample.mime_type.startswith(("text/", "application/j"))
]


def test_allowed_types_are_the_eighteen_of_the_specification() -> None:
    assert ALLOWED_MIME_TYPES == {sample.mime_type for sample in ALLOWED}
    assert len(ALLOWED_MIME_TYPES) == 18
    assert "audio/x-wav" in ALLOWED_MIME_TYPES


@pytest.mark.parametrize("sample", ALLOWED, ids=lambda sample: sample.filename)
def test_detected_with_its_usual_name(sample: AllowedSample) -> None:
    assert detect(sample.data, sample.filename) == sample.mime_type


@pytest.mark.parametrize("sample", ALLOWED, ids=lambda sample: sample.filename)
def test_detected_without_a_name(sample: AllowedSample) -> None:
    assert detect(sample.data) == sample.mime_type
    assert detect(sample.data, "") == sample.mime_type
    assert detect(sample.data, "no-extension") == sample.mime_type


@pytest.mark.parametrize("sample", BINARY, ids=lambda sample: sample.filename)
@pytest.mark.parametrize(
    "name", ["misnamed.txt", "misnamed.csv", "misnamed.json", "x.exe", "a.rdf"]
)
def test_binary_types_ignore_misleading_names(sample: AllowedSample, name: str) -> None:
    assert detect(sample.data, name) == sample.mime_type


@pytest.mark.parametrize(
    ("data", "mime_type"),
    [
        (samples.webp_bytes(lossless=True), "image/webp"),
        (samples.webp_bytes(extended=True), "image/webp"),
        (samples.animated_gif_bytes(), "image/gif"),
        (samples.mp3_without_tag_bytes(), "audio/mpeg"),
        (samples.ogg_opus_bytes(), "audio/ogg"),
        (samples.fixture("note-libreoffice.docx"), samples.MIME_DOCX),
        (samples.csv_bytes(";"), "text/csv"),
        (samples.json_array_bytes(), "application/json"),
        (samples.latin1_text_bytes(), "text/plain"),
        (b"\xef\xbb\xbf" + samples.json_bytes(), "application/json"),
        (b"\xef\xbb\xbf" + samples.text_bytes(), "text/plain"),
        (b"\xef\xbb\xbf" + samples.rdf_bytes(), "application/rdf+xml"),
    ],
    ids=[
        "webp-lossless",
        "webp-extended",
        "gif-animated",
        "mp3-without-id3",
        "ogg-opus",
        "docx-by-libreoffice",
        "csv-semicolon",
        "json-array",
        "latin1-text",
        "json-with-bom",
        "text-with-bom",
        "rdf-with-bom",
    ],
)
def test_variants_made_by_other_tools_and_options(data: bytes, mime_type: str) -> None:
    assert detect(data) == mime_type
