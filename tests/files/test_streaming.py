"""Large transfers: streamed through in chunks, limits enforced on the exact byte count."""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from app import streaming
from tests.support.api import Account, Api

MiB = 1024 * 1024
LIMIT = 200 * MiB


class GeneratedUpload:
    """A multipart body of one text file of `size` bytes, produced as it is read.

    Neither the test nor the client ever holds the file, so the server's memory use is the
    only thing a measurement sees.
    """

    boundary = "streaming-test-boundary"

    def __init__(self, size: int, name: str = "big.txt") -> None:
        self.head = (
            f'--{self.boundary}\r\nContent-Disposition: form-data; name="files[]"; '
            f'filename="{name}"\r\nContent-Type: text/plain\r\n\r\n'
        ).encode()
        self.tail = f"\r\n--{self.boundary}--\r\n".encode()
        self.size = size
        self.sent = 0
        self.line = b"Zeile mit etwas Text, 0123456789.\n" * 2048
        self.digest = hashlib.sha256()
        self._position = 0

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"

    @property
    def content_length(self) -> int:
        return len(self.head) + self.size + len(self.tail)

    def _body(self, n: int) -> bytes:
        n = min(n, self.size - self.sent)
        out = bytearray()
        while len(out) < n:
            offset = (self.sent + len(out)) % len(self.line)
            out += self.line[offset : offset + n - len(out)]
        self.sent += n
        self.digest.update(out)
        return bytes(out)

    # Werkzeug's test client measures the stream with tell/seek before it reads anything.
    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = 0) -> int:
        assert self.sent == 0, "only seekable before reading"
        self._position = self.content_length + offset if whence == 2 else offset
        return self._position

    def read(self, n: int = -1) -> bytes:
        n = 1024 * 1024 if n is None or n < 0 else n
        if self.head:
            chunk, self.head = self.head[:n], self.head[n:]
            return chunk
        if self.sent < self.size:
            return self._body(n)
        chunk, self.tail = self.tail[:n], self.tail[n:]
        return chunk


def post_generated(api: Api, account: Account, upload: GeneratedUpload) -> Any:
    return api.client.post(
        "/api/files",
        input_stream=upload,
        headers={**account.auth, "Content-Type": upload.content_type},
        environ_overrides={"CONTENT_LENGTH": str(upload.content_length)},
    )


def traced_peak(action) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        result = action()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_file_size(api: Api, alice: Account):
    peaks = {}
    for size in (48 * MiB, 144 * MiB):
        upload = GeneratedUpload(size)
        response, peaks[size] = traced_peak(lambda u=upload: post_generated(api, alice, u))
        assert response.status_code == 201, response.get_json()
        record = response.get_json()["files"][0]
        assert record["size"] == size

        def download(record_id: str = record["id"]) -> tuple[int, str]:
            response = api.client.get(
                f"/api/files/{record_id}/download", headers=alice.auth, buffered=False
            )
            digest, received = hashlib.sha256(), 0
            for chunk in response.response:
                digest.update(chunk)
                received += len(chunk)
            response.close()
            return received, digest.hexdigest()

        (received, digest), download_peak = traced_peak(download)
        assert received == size and digest == upload.digest.hexdigest()
        # A chunk or two in flight, whatever the size.
        assert download_peak < 8 * MiB, download_peak

    small, big = peaks[48 * MiB], peaks[144 * MiB]
    # Three times the bytes, the same memory: the detection sample, the S3 parts in flight
    # and a few chunks, never the file.
    assert big - small < 8 * MiB, peaks
    assert big < 64 * MiB, peaks


@pytest.mark.slow
def test_the_size_limit_is_200_mebibytes_inclusive(api: Api, alice: Account):
    at_limit = post_generated(api, alice, GeneratedUpload(LIMIT, "exact.txt"))
    assert at_limit.status_code == 201, at_limit.get_json()
    assert at_limit.get_json()["files"][0]["size"] == 209_715_200

    over = post_generated(api, alice, GeneratedUpload(LIMIT + 1, "over.txt"))
    assert over.status_code == 422
    assert over.get_json()["errors"] == {
        "files.0": ["The files.0 field must not be greater than 204800 kilobytes."]
    }
    assert len(api.rows()) == 1 and len(api.objects()) == 1


def _resident_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux /proc")
def test_memory_freed_before_a_long_body_goes_back_to_the_system():
    """An archive's request reads every record once before its body streams; what it freed
    must not stay resident between the blocks that live on (issue 21: 0.27 MiB per slow
    reader of a 1,000-record archive)."""
    kept, freed = [], []
    for n in range(3000):
        kept.append(bytes([n % 256]) * 600)
        freed.append(bytes([n % 256]) * 20_000)  # a manifest record's size
    del freed
    before = _resident_bytes()
    streaming.trim_freed_memory()
    assert _resident_bytes() < before - 30_000_000  # of the 60 MB freed
    assert len(kept) == 3000
