"""What every storage backend promises, written once and run against each backend.

A test module subclasses ``StorageContract`` and provides a ``storage`` fixture.
"""

from __future__ import annotations

import hashlib
import io
import os
from datetime import UTC, datetime, timedelta

import pytest

from app.storage import InvalidRange, ObjectNotFound, Storage
from app.storage.base import MiB
from app.storage.s3 import S3Storage

from .helpers import pending_uploads

KEY = "files/3f2b8c1e-0000-4000-8000-000000000001/9d7e6a52-0000-4000-8000-000000000002"

BAD_KEYS = [
    "",
    "/files/a",
    "../etc/passwd",
    "files/../../x",
    "files/./x",
    "files//x",
    "files/x/",
    "files\\x",
    "files/\x00",
    "x" * 1025,
]


def digest(data: bytes) -> str:
    """Compare large contents by hash, so a failure does not print megabytes."""
    return hashlib.sha256(data).hexdigest()


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


class StorageContract:
    @pytest.fixture
    def data(self, storage: Storage) -> bytes:
        """A few chunks plus a tail, so chunking and the last short chunk are both exercised."""
        return os.urandom(3 * storage.chunk_size + 17)

    def test_put_then_open_returns_the_same_bytes_in_chunks(
        self, storage: Storage, data: bytes
    ) -> None:
        assert storage.put(KEY, io.BytesIO(data)) == len(data)

        reader = storage.open(KEY)
        assert reader.length == reader.size == len(data)
        chunks = list(reader)
        assert b"".join(chunks) == data
        assert all(0 < len(chunk) <= storage.chunk_size for chunk in chunks)
        assert reader.closed  # released as soon as the last chunk is out

    @pytest.mark.parametrize(
        ("start", "end"),
        [(0, 0), (0, 99), (10, 19), (100, None), (-1, None), (5, -1), (-1, -1)],
        ids=["first-byte", "head", "middle", "from-100", "last-byte", "to-end", "last-to-end"],
    )
    def test_open_range_yields_exactly_the_inclusive_range(
        self, storage: Storage, data: bytes, start: int, end: int | None
    ) -> None:
        storage.put(KEY, io.BytesIO(data))
        size = len(data)
        start = start % size
        end = None if end is None else end % size

        with storage.open(KEY, start, end) as reader:
            expected = data[start : size if end is None else end + 1]
            assert (reader.start, reader.length, reader.size) == (start, len(expected), size)
            assert reader.read_all() == expected

    def test_open_range_end_beyond_the_object_is_clamped(
        self, storage: Storage, data: bytes
    ) -> None:
        """Like HTTP: a last-byte-pos past the end means "to the end"."""
        storage.put(KEY, io.BytesIO(data))
        with storage.open(KEY, 5, len(data) + 1000) as reader:
            assert reader.length == len(data) - 5
            assert reader.read_all() == data[5:]

    @pytest.mark.parametrize("offset", [0, 1, 1000])
    def test_open_range_starting_at_or_beyond_the_end_is_invalid(
        self, storage: Storage, offset: int
    ) -> None:
        storage.put(KEY, io.BytesIO(b"0123456789"))
        with pytest.raises(InvalidRange):
            storage.open(KEY, 10 + offset, None)
        with pytest.raises(InvalidRange):
            storage.open(KEY, 10 + offset, 20 + offset)

    @pytest.mark.parametrize(("start", "end"), [(-1, None), (5, 4)])
    def test_open_rejects_malformed_ranges(
        self, storage: Storage, start: int, end: int | None
    ) -> None:
        storage.put(KEY, io.BytesIO(b"0123456789"))
        with pytest.raises(ValueError):
            storage.open(KEY, start, end)

    def test_empty_object_round_trips(self, storage: Storage) -> None:
        assert storage.put(KEY, io.BytesIO(b"")) == 0
        assert storage.size(KEY) == 0
        with storage.open(KEY) as reader:
            assert reader.length == 0
            assert reader.read_all() == b""

    def test_missing_object(self, storage: Storage) -> None:
        with pytest.raises(ObjectNotFound):
            storage.open(KEY)
        with pytest.raises(ObjectNotFound):
            storage.open(KEY, 3, 5)
        with pytest.raises(ObjectNotFound):
            storage.size(KEY)
        assert not storage.exists(KEY)

    def test_exists_and_size(self, storage: Storage, data: bytes) -> None:
        storage.put(KEY, io.BytesIO(data))
        assert storage.exists(KEY)
        assert storage.size(KEY) == len(data)
        assert not storage.exists(KEY + "x")
        assert not storage.exists("files/3f2b8c1e-0000-4000-8000-000000000001")  # a "folder"

    def test_put_replaces_an_existing_object(self, storage: Storage) -> None:
        storage.put(KEY, io.BytesIO(b"first version, longer"))
        storage.put(KEY, io.BytesIO(b"second"))
        with storage.open(KEY) as reader:
            assert reader.read_all() == b"second"

    def test_delete_is_idempotent(self, storage: Storage, data: bytes) -> None:
        storage.put(KEY, io.BytesIO(data))
        storage.delete(KEY)
        assert not storage.exists(KEY)
        with pytest.raises(ObjectNotFound):
            storage.open(KEY)
        storage.delete(KEY)
        storage.delete("files/never/stored")
        assert list(storage.iter_keys()) == []

    def test_iter_keys_filters_by_prefix(self, storage: Storage) -> None:
        keys = ["files/a/1", "files/a/2", "files/ab/1", "files/b/1", "other/x", "top"]
        for key in keys:
            storage.put(key, io.BytesIO(key.encode()))

        assert sorted(storage.iter_keys()) == keys
        assert sorted(storage.iter_keys("files/")) == keys[:4]
        assert sorted(storage.iter_keys("files/a")) == keys[:3]
        assert sorted(storage.iter_keys("files/a/")) == keys[:2]
        assert sorted(storage.iter_keys("files/a/2")) == ["files/a/2"]
        assert sorted(storage.iter_keys("t")) == ["top"]
        assert list(storage.iter_keys("nothing/")) == []

    def test_iter_objects_reports_size_and_age(self, storage: Storage) -> None:
        before = datetime.now(UTC) - timedelta(seconds=5)
        storage.put("files/x/1", io.BytesIO(b"12345"))
        [stored] = list(storage.iter_objects("files/"))
        assert (stored.key, stored.size) == ("files/x/1", 5)
        assert before <= stored.modified <= datetime.now(UTC) + timedelta(seconds=5)

    def test_object_is_visible_only_after_commit(self, storage: Storage) -> None:
        with storage.writer(KEY) as writer:
            writer.write(b"hello ")
            writer.write(b"world")
            assert not storage.exists(KEY)
            assert list(storage.iter_keys()) == []
            writer.commit()
        assert writer.size == 11
        assert storage.size(KEY) == 11
        assert pending_uploads(storage) == []

    def test_abort_leaves_nothing_behind(self, storage: Storage, data: bytes) -> None:
        writer = storage.writer(KEY)
        writer.write(data)
        writer.abort()
        writer.abort()  # idempotent

        assert not storage.exists(KEY)
        assert list(storage.iter_keys()) == []
        assert pending_uploads(storage) == []
        with pytest.raises(RuntimeError):
            writer.write(b"more")
        with pytest.raises(RuntimeError):
            writer.commit()

    def test_abort_without_writing_is_fine(self, storage: Storage) -> None:
        storage.writer(KEY).abort()
        assert pending_uploads(storage) == []

    def test_exception_in_with_block_aborts(self, storage: Storage, data: bytes) -> None:
        with pytest.raises(ZeroDivisionError), storage.writer(KEY) as writer:
            writer.write(data)
            1 / 0  # noqa: B018
        assert writer.aborted
        assert not storage.exists(KEY)
        assert pending_uploads(storage) == []

    def test_leaving_with_block_without_commit_aborts(self, storage: Storage) -> None:
        with storage.writer(KEY) as writer:
            writer.write(b"never committed")
        assert not storage.exists(KEY)
        assert pending_uploads(storage) == []

    def test_abort_after_commit_keeps_the_object(self, storage: Storage) -> None:
        writer = storage.writer(KEY)
        writer.write(b"kept")
        writer.commit()
        writer.abort()
        assert storage.size(KEY) == 4

    def test_large_object_round_trips_with_bounded_buffer(self, storage: Storage) -> None:
        """12 MiB to S3: a first part of the single-PUT limit (8 MiB), then a short last one."""
        part_size = getattr(storage, "part_size", 5 * MiB)
        first = getattr(storage, "single_put_limit", part_size)
        # The part that fills plus the parts still going up (S3 sends them in the background).
        bound = first + part_size * getattr(storage, "parts_in_flight", 0)
        data = os.urandom(12 * MiB)
        writer = storage.writer(KEY)
        for chunk in chunked(data, 1 * MiB + 13):  # chunks do not align with parts
            writer.write(chunk)
            assert writer.buffered <= bound
        assert not storage.exists(KEY)
        if isinstance(storage, S3Storage):
            assert writer.upload_id is not None  # type: ignore[attr-defined]
        writer.commit()

        assert pending_uploads(storage) == []
        assert storage.size(KEY) == len(data)
        with storage.open(KEY) as reader:
            assert digest(reader.read_all()) == digest(data)
        with storage.open(KEY, 5 * MiB - 10, 5 * MiB + 9) as reader:  # across a part boundary
            assert reader.read_all() == data[5 * MiB - 10 : 5 * MiB + 10]

    def test_abort_of_a_large_object_removes_uploaded_parts(self, storage: Storage) -> None:
        writer = storage.writer(KEY)
        for chunk in chunked(os.urandom(12 * MiB), 1 * MiB):
            writer.write(chunk)
        if isinstance(storage, S3Storage):
            assert writer.upload_id is not None  # type: ignore[attr-defined]
        writer.abort()
        assert not storage.exists(KEY)
        assert pending_uploads(storage) == []

    def test_object_of_exactly_one_part(self, storage: Storage) -> None:
        """An object of exactly the single-PUT limit is one PUT, not a multipart upload."""
        size = getattr(storage, "single_put_limit", 5 * MiB)
        data = os.urandom(size)
        writer = storage.writer(KEY)
        writer.write(data)
        if isinstance(storage, S3Storage):
            assert writer.upload_id is None  # type: ignore[attr-defined]
        writer.commit()
        with storage.open(KEY) as reader:
            assert digest(reader.read_all()) == digest(data)

    def test_closing_a_reader_early_releases_it(self, storage: Storage, data: bytes) -> None:
        storage.put(KEY, io.BytesIO(data))
        reader = storage.open(KEY)
        iterator = iter(reader)
        assert 0 < len(next(iterator)) <= storage.chunk_size
        reader.close()
        reader.close()
        assert reader.closed
        storage.delete(KEY)  # nothing holds the object open any more
        assert not storage.exists(KEY)

    @pytest.mark.parametrize("key", BAD_KEYS)
    def test_bad_keys_are_rejected(self, storage: Storage, key: str) -> None:
        with pytest.raises(ValueError):
            storage.writer(key)
        with pytest.raises(ValueError):
            storage.put(key, io.BytesIO(b"x"))
        with pytest.raises(ValueError):
            storage.open(key)
        with pytest.raises(ValueError):
            storage.delete(key)
        with pytest.raises(ValueError):
            storage.exists(key)
        with pytest.raises(ValueError):
            storage.size(key)
        assert pending_uploads(storage) == []

    def test_check_passes(self, storage: Storage) -> None:
        storage.check()
        assert pending_uploads(storage) == []


class AbandonedUploadsContract:
    """For real backends only: moto reports a fixed start time for every multipart upload."""

    def test_abandoned_unfinished_writes_are_removed_by_age(self, storage: Storage) -> None:
        # Large enough to be a multipart upload on S3 (with the small part size of the tests).
        writer = storage.writer("files/x/abandoned")
        writer.write(b"x" * (6 * 1024 * 1024))
        writer.write(b"y" * (6 * 1024 * 1024))
        # A killed process never commits nor aborts: the unfinished write just stays.
        assert list(storage.unfinished_uploads(datetime.now(UTC) - timedelta(hours=1))) == []
        [listed] = storage.unfinished_uploads(datetime.now(UTC) + timedelta(seconds=5))
        assert abs((listed.started - datetime.now(UTC)).total_seconds()) < 60
        assert list(storage.unfinished_uploads(datetime.now(UTC) + timedelta(seconds=5))) == [
            listed
        ]  # listing changes nothing
        assert storage.remove_abandoned_uploads(datetime.now(UTC) - timedelta(hours=1)) == 0
        assert storage.remove_abandoned_uploads(datetime.now(UTC) + timedelta(seconds=5)) == 1
        assert storage.remove_abandoned_uploads(datetime.now(UTC) + timedelta(seconds=5)) == 0
        assert list(storage.iter_keys()) == []
        writer.abort()  # releases what the test process still holds; nothing left to discard
