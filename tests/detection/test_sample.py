"""The bounded sample: what it holds, how it serves reads, and how a stream builds it."""

from __future__ import annotations

import io
import random
import tracemalloc

import pytest

from app.detection import HEAD_BYTES, TAIL_BYTES, OutsideSample, Sample, SampleCollector

MIB = 1024 * 1024
SIZES = [1, 1000, HEAD_BYTES, HEAD_BYTES + 1, HEAD_BYTES + TAIL_BYTES - 1, 5 * MIB + 123]


def content(size: int) -> bytes:
    return random.Random(size).randbytes(size)


def test_limits_are_two_and_one_mebibytes() -> None:
    assert HEAD_BYTES == 2 * MIB
    assert TAIL_BYTES == 1 * MIB


@pytest.mark.parametrize("size", SIZES)
def test_sample_holds_first_and_last_bytes(size: int) -> None:
    data = content(size)

    sample = Sample.from_bytes(data)

    assert sample.size == size
    assert sample.head == data[:HEAD_BYTES]
    assert sample.tail == data[-TAIL_BYTES:]


def test_sample_is_immutable() -> None:
    sample = Sample.from_bytes(b"abc")

    with pytest.raises(AttributeError):
        sample.size = 5  # type: ignore[misc]


def test_sample_rejects_parts_longer_than_the_content() -> None:
    with pytest.raises(ValueError):
        Sample(head=b"abcd", tail=b"", size=3)


def test_read_at_serves_head_and_tail_of_a_large_content() -> None:
    data = content(5 * MIB)
    sample = Sample.from_bytes(data)

    assert sample.read_at(0, 16) == data[:16]
    assert sample.read_at(HEAD_BYTES - 4, 4) == data[HEAD_BYTES - 4 : HEAD_BYTES]
    assert sample.read_at(len(data) - TAIL_BYTES, 10) == data[-TAIL_BYTES:][:10]
    assert sample.read_at(len(data) - 3, 100) == data[-3:]
    assert sample.read_at(len(data) + 10, 5) == b""


@pytest.mark.parametrize(
    ("offset", "length"),
    [(HEAD_BYTES, 1), (HEAD_BYTES - 1, 2), (3 * MIB, 10), (5 * MIB - TAIL_BYTES - 1, 2)],
)
def test_read_at_refuses_bytes_in_the_gap(offset: int, length: int) -> None:
    sample = Sample.from_bytes(content(5 * MIB))

    with pytest.raises(OutsideSample):
        sample.read_at(offset, length)


def test_read_at_spans_head_and_tail_when_they_meet() -> None:
    data = content(HEAD_BYTES + TAIL_BYTES // 2)
    sample = Sample.from_bytes(data)

    assert sample.read_at(HEAD_BYTES - 10, 40) == data[HEAD_BYTES - 10 : HEAD_BYTES + 30]
    assert sample.read_at(0, len(data)) == data


def test_read_at_rejects_negative_arguments() -> None:
    with pytest.raises(ValueError):
        Sample.from_bytes(b"abc").read_at(-1, 2)


class CountingFile(io.BytesIO):
    """A seekable file that records which byte ranges were read."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.ranges: list[tuple[int, int]] = []

    def read(self, size: int | None = -1) -> bytes:
        start = self.tell()
        chunk = super().read(size)
        self.ranges.append((start, start + len(chunk)))
        return chunk


@pytest.mark.parametrize("size", SIZES)
def test_from_file_matches_from_bytes_and_reads_only_head_and_tail(size: int) -> None:
    data = content(size)
    fileobj = CountingFile(data)

    sample = Sample.from_file(fileobj)

    assert sample == Sample.from_bytes(data)
    assert sum(end - start for start, end in fileobj.ranges) <= HEAD_BYTES + TAIL_BYTES
    for start, end in fileobj.ranges:
        assert end <= HEAD_BYTES or start >= size - TAIL_BYTES


def test_from_file_starts_at_the_current_position_and_restores_it() -> None:
    data = content(HEAD_BYTES + 3 * TAIL_BYTES)
    fileobj = io.BytesIO(b"prefix" + data)
    fileobj.seek(6)

    sample = Sample.from_file(fileobj)

    assert sample == Sample.from_bytes(data)
    assert fileobj.tell() == 6


def feed_randomly(data: bytes, seed: int) -> Sample:
    rng = random.Random(seed)
    collector = SampleCollector()
    position = 0
    while position < len(data):
        step = rng.choice([0, 1, 7, 4096, 65536, 300_000, TAIL_BYTES + 5])
        collector.feed(data[position : position + step])
        position += step
    assert collector.size == len(data)
    return collector.sample()


@pytest.mark.parametrize("size", [0, *SIZES])
def test_collector_fed_random_chunks_equals_from_file(size: int) -> None:
    data = content(size)

    for seed in range(3):
        assert feed_randomly(data, seed) == Sample.from_file(io.BytesIO(data))


def test_collector_accepts_bytearray_and_memoryview() -> None:
    collector = SampleCollector()
    collector.feed(bytearray(b"abc"))
    collector.feed(memoryview(b"def"))

    assert collector.sample() == Sample.from_bytes(b"abcdef")


def test_collector_keeps_nothing_of_a_buffer_the_caller_reuses() -> None:
    buffer = bytearray(b"first")
    collector = SampleCollector()
    collector.feed(buffer)
    collector.feed(memoryview(buffer))
    buffer[:] = b"XXXXX"

    assert collector.sample() == Sample.from_bytes(b"firstfirst")


def test_collector_memory_stays_bounded_while_streaming() -> None:
    chunk = content(64 * 1024)
    collector = SampleCollector()
    tracemalloc.start()
    try:
        for _ in range(16 * MIB // len(chunk)):
            # A new object every time, as a stream gives them: keeping each would show.
            collector.feed(bytearray(chunk))
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert collector.size == 16 * MIB
    assert peak < HEAD_BYTES + TAIL_BYTES + 2 * MIB
    sample = collector.sample()
    assert len(sample.head) == HEAD_BYTES
    assert len(sample.tail) == TAIL_BYTES
