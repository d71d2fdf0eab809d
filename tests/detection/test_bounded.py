"""Detection stays within the sample: big files, forged sizes and bombs cost bounded work."""

from __future__ import annotations

import io
import random
import struct
import time
import tracemalloc
import zipfile
from collections.abc import Callable, Iterator

import pytest

from app.detection import (
    HEAD_BYTES,
    TAIL_BYTES,
    OutsideSample,
    Sample,
    SampleCollector,
    UnsupportedFileType,
    detect_mime_type,
)
from tests.support import samples

MIB = 1024 * 1024


class Reads:
    """Every successful ``Sample.read_at`` during detection, as (offset, end) pairs."""

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int]] = []
        self.refused = 0


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[Reads]:
    record = Reads()
    original = Sample.read_at

    def recording_read_at(self: Sample, offset: int, length: int) -> bytes:
        try:
            data = original(self, offset, length)
        except OutsideSample:
            record.refused += 1
            raise
        record.ranges.append((offset, offset + len(data)))
        return data

    monkeypatch.setattr(Sample, "read_at", recording_read_at)
    yield record


def assert_within_sample(sample: Sample, reads: Reads) -> None:
    for start, end in reads.ranges:
        assert end <= len(sample.head) or start >= sample.tail_offset or sample.is_complete


def measured(action: Callable[[], object]) -> tuple[object, float, int]:
    """Result (or raised exception), seconds taken and peak bytes allocated by ``action``."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        result: object = action()
    except UnsupportedFileType as error:
        result = error
    finally:
        elapsed = time.perf_counter() - started
        _current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return result, elapsed, peak


def stream(data: bytes, chunk_size: int = 64 * 1024) -> Sample:
    collector = SampleCollector()
    for start in range(0, len(data), chunk_size):
        collector.feed(data[start : start + chunk_size])
    return collector.sample()


def test_big_zip_is_classified_from_head_and_tail(reads: Reads) -> None:
    data = samples.big_zip_bytes()
    assert len(data) > HEAD_BYTES + TAIL_BYTES + MIB
    sample = stream(data)
    assert sample == Sample.from_file(io.BytesIO(data))

    assert detect_mime_type(sample, "archive.zip") == "application/zip"
    assert_within_sample(sample, reads)


def many_members(last: str | None = None, count: int = 30_000) -> bytes:
    """An archive whose central directory (~2 MiB) is larger than the tail."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for index in range(count):
            info = zipfile.ZipInfo(f"files/member-{index:06d}.txt", samples.ZIP_TIME)
            archive.writestr(info, b"y" * 100)
        if last:
            archive.writestr(zipfile.ZipInfo(last, samples.ZIP_TIME), b"dex\n035\x00")
    return buffer.getvalue()


def test_central_directory_larger_than_the_tail_is_read_where_it_can_be(reads: Reads) -> None:
    plain = many_members()
    sample = Sample.from_bytes(plain)

    assert detect_mime_type(sample) == "application/zip"
    assert reads.refused > 0  # the directory's start really was outside the sample
    assert_within_sample(sample, reads)
    with pytest.raises(UnsupportedFileType, match="APK"):
        detect_mime_type(Sample.from_bytes(many_members(last="classes.dex")))


def padded_office(data: bytes, before: int, after: int) -> bytes:
    """Put incompressible members around [Content_Types].xml so that it lies in the gap."""
    source = zipfile.ZipFile(io.BytesIO(data))
    rng = random.Random(7)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as target:
        target.writestr(zipfile.ZipInfo("media/a.bin", samples.ZIP_TIME), rng.randbytes(before))
        target.writestr(source.getinfo("[Content_Types].xml"), source.read("[Content_Types].xml"))
        target.writestr(zipfile.ZipInfo("media/b.bin", samples.ZIP_TIME), rng.randbytes(after))
        for info in source.infolist():
            if info.filename != "[Content_Types].xml":
                target.writestr(info, source.read(info))
    return buffer.getvalue()


def test_office_document_with_content_types_out_of_reach_is_judged_by_part_names(
    reads: Reads,
) -> None:
    docx = padded_office(samples.docx_bytes(), before=3 * MIB, after=2 * MIB)
    assert detect_mime_type(Sample.from_bytes(docx)) == samples.MIME_DOCX

    xlsm = padded_office(samples.xlsm_bytes(), before=3 * MIB, after=2 * MIB)
    with pytest.raises(UnsupportedFileType, match="macros"):
        detect_mime_type(Sample.from_bytes(xlsm))


@pytest.mark.parametrize("zip64", [False, True], ids=["zip32", "zip64"])
def test_forged_central_directory_size_is_refused_quickly(reads: Reads, zip64: bool) -> None:
    data = samples.zip_with_forged_directory_bytes(zip64=zip64)
    sample = Sample.from_bytes(data)

    result, elapsed, peak = measured(lambda: detect_mime_type(sample))

    assert isinstance(result, UnsupportedFileType)
    assert "damaged" in result.reason
    assert elapsed < 1.0
    assert peak < MIB
    assert_within_sample(sample, reads)


def test_forged_directory_pointing_into_the_gap_stays_in_the_sample(reads: Reads) -> None:
    """A big archive whose end record claims a directory starting in the unsampled middle."""
    data = bytearray(samples.big_zip_bytes())
    end = data.rindex(b"PK\x05\x06")
    struct.pack_into("<HHII", data, end + 8, 0xFFFF, 0xFFFF, end - 3 * MIB, 3 * MIB)
    sample = Sample.from_bytes(bytes(data))

    result, elapsed, peak = measured(lambda: detect_mime_type(sample))

    assert result == "application/zip"  # resynchronised on the directory's end in the tail
    assert elapsed < 2.0
    assert peak < 4 * MIB
    assert reads.refused > 0
    assert_within_sample(sample, reads)


def test_compressed_content_types_bomb_is_inflated_only_up_to_a_bound() -> None:
    bomb = b"<!-- padding -->" + b" " * (64 * MIB)

    def content_types(original: bytes) -> bytes:
        return original.replace(b"</Types>", bomb + b"</Types>")

    data = samples.rewrite_zip(samples.docx_bytes(), replace={"[Content_Types].xml": content_types})
    assert len(data) < 2 * MIB
    sample = Sample.from_bytes(data)

    result, elapsed, peak = measured(lambda: detect_mime_type(sample))

    assert result == samples.MIME_DOCX
    assert elapsed < 2.0
    assert peak < 16 * MIB


def test_billion_laughs_is_refused_quickly_without_expanding_entities() -> None:
    sample = Sample.from_bytes(samples.billion_laughs_bytes())

    result, elapsed, peak = measured(lambda: detect_mime_type(sample, "graph.rdf"))

    assert isinstance(result, UnsupportedFileType)
    assert "DOCTYPE" in result.reason
    assert elapsed < 0.5
    assert peak < MIB


def test_forged_ole_directory_chain_is_refused_quickly() -> None:
    data = bytearray(samples.doc_bytes())
    struct.pack_into("<I", data, 0x48, 0xFFFFFFF0)  # absurd DIFAT sector count
    struct.pack_into("<I", data, 0x30, 0x00FFFFFF)  # directory far beyond the file
    sample = Sample.from_bytes(bytes(data))

    result, elapsed, _peak = measured(lambda: detect_mime_type(sample))

    assert isinstance(result, UnsupportedFileType)
    assert result.reason == "The legacy Office (OLE2) file is damaged."
    assert elapsed < 0.5


@pytest.mark.parametrize(
    "data",
    [
        b"a,b\n" * (3 * HEAD_BYTES // 4),
        b"[" * (3 * HEAD_BYTES),
        b"[" * 100_000 + b"]" * 100_000,
        samples.big_json_bytes(),
    ],
    ids=["big-csv", "unbalanced-brackets", "deep-nesting", "big-json"],
)
def test_large_text_is_judged_in_bounded_time(data: bytes) -> None:
    sample = Sample.from_bytes(data)

    result, elapsed, _peak = measured(lambda: detect_mime_type(sample))

    assert result in {"text/plain", "text/csv", "application/json"}
    assert elapsed < 2.0


@pytest.mark.parametrize(
    ("make", "mime_type"),
    [
        (samples.big_zip_bytes, "application/zip"),
        (samples.big_json_bytes, "application/json"),
        (lambda: samples.pdf_bytes()[:-6] + b" " * (4 * MIB) + b"\n%%EOF\n", "application/pdf"),
        (
            lambda: (
                samples.mp3_without_tag_bytes() * (5 * MIB // len(samples.mp3_without_tag_bytes()))
            ),
            "audio/mpeg",
        ),
    ],
    ids=["zip", "json", "pdf", "mp3"],
)
def test_streamed_big_files_are_classified_like_small_ones(
    make: Callable[[], bytes], mime_type: str, reads: Reads
) -> None:
    data = make()
    assert len(data) > HEAD_BYTES + TAIL_BYTES
    sample = stream(data, chunk_size=100_003)

    assert detect_mime_type(sample) == mime_type
    assert_within_sample(sample, reads)
