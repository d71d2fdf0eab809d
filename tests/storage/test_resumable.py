"""The resumable store of each backend (tus pieces between requests): what an S3 upload of
many small pieces moves, and that the object comes out byte for byte."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest

from app.storage import Storage
from app.storage.base import MiB
from app.storage.resumable import resumable_store
from app.storage.s3 import S3Storage


class BytesPiece:
    """What app/tus/pieces.py hands a backend, for bytes in memory."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = 0

    def chunks(self) -> Iterator[bytes]:
        stream = io.BytesIO(self.data)
        while chunk := stream.read(MiB):
            self.size += len(chunk)
            yield chunk

    def write_to(self, fd: int, offset: int) -> None:
        import os

        os.pwrite(fd, self.data, offset)
        self.size = len(self.data)

    def verify(self) -> None:
        pass


class Traffic:
    """Bytes the store wrote to S3 and read back from it."""

    def __init__(self, storage: S3Storage, monkeypatch: pytest.MonkeyPatch) -> None:
        self.written = self.read = self.requests = 0
        client = storage.client
        for name in ("put_object", "upload_part"):
            monkeypatch.setattr(client, name, self._writing(getattr(client, name)))
        monkeypatch.setattr(storage, "open", self._reading(storage.open))

    def _writing(self, call: Any) -> Any:
        def counted(**kwargs: Any) -> Any:
            self.written += kwargs["ContentLength"]
            self.requests += 1
            return call(**kwargs)

        return counted

    def _reading(self, call: Any) -> Any:
        traffic = self

        class Counted:
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                self.inner = call(*args, **kwargs)

            def __enter__(self) -> Iterator[bytes]:
                reader = self.inner.__enter__()

                def chunks() -> Iterator[bytes]:
                    for chunk in reader:
                        traffic.read += len(chunk)
                        yield chunk

                traffic.requests += 1
                return chunks()

            def __exit__(self, *exc: Any) -> Any:
                return self.inner.__exit__(*exc)

        return Counted


def test_small_pieces_on_s3_do_not_rewrite_what_waits(
    s3_storage: S3Storage, monkeypatch: pytest.MonkeyPatch
):
    """A 4 MiB piece, then 100 one-byte pieces and 20 empty ones, then the rest: each byte
    is stored about once on its way to a part (before: the whole waiting tail was read and
    rewritten for every piece, 100 pieces moved 800 MiB), and an empty piece moves nothing."""
    first, tiny, rest = 4 * MiB, 100, 1000
    data = bytes(range(256)) * ((first + tiny + rest) // 256 + 1)
    data = data[: first + tiny + rest]
    store = resumable_store(s3_storage)
    key = "files/ab/resumable-test"
    state = store.begin("u1", key)
    traffic = Traffic(s3_storage, monkeypatch)

    def append(offset: int, piece: bytes) -> None:
        nonlocal state
        new = store.append("u1", key, state, offset, BytesPiece(piece), len(data))
        store.settle("u1", state, new)
        state = new

    append(0, data[:first])
    for offset in range(first, first + tiny):
        append(offset, data[offset : offset + 1])
    before_empty = (traffic.written, traffic.read, traffic.requests)
    for _ in range(20):
        append(first + tiny, b"")
    assert (traffic.written, traffic.read, traffic.requests) == before_empty
    append(first + tiny, data[first + tiny :])
    store.complete("u1", key, state)
    written, read = traffic.written, traffic.read

    with s3_storage.open(key) as reader:
        assert b"".join(reader) == data
    assert [o.key for o in s3_storage.iter_objects("uploads/")] == []
    # The 4 MiB piece goes in once and out once into the part; the small ones add little.
    assert written <= 2 * len(data) + 64 * 1024
    assert read <= len(data) + 64 * 1024


@pytest.mark.parametrize("pieces", [[3, 1, 1, 2, 5, 1], [1] * 9, [9]])
def test_the_object_is_the_pieces_in_order(storage: Storage, pieces: list[int]):
    """However small pieces are merged while they wait, the object is their bytes in order."""
    data = b"".join(bytes([n]) * size for n, size in enumerate(pieces, start=1))
    store = resumable_store(storage)
    key = "files/cd/resumable-order"
    state = store.begin("u2", key)
    offset = 0
    for size in pieces:
        new = store.append(
            "u2", key, state, offset, BytesPiece(data[offset : offset + size]), len(data)
        )
        store.settle("u2", state, new)
        state, offset = new, offset + size
    store.complete("u2", key, state)
    with storage.open(key) as reader:
        assert b"".join(reader) == data
    assert [o.key for o in storage.iter_objects("uploads/")] == []
