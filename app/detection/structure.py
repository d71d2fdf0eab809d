"""Small readers shared by the binary rules."""

from __future__ import annotations

import struct
from collections.abc import Iterator


def iter_riff_chunks(data: bytes, start: int, end: int) -> Iterator[tuple[bytes, int, int]]:
    """Yield (fourcc, data offset, data size) for each RIFF chunk whose header is in data[:end].

    Chunk sizes are not checked against ``end``; callers decide whether an overrun matters.
    """
    pos = start
    limit = min(end, len(data))
    while pos + 8 <= limit:
        fourcc = data[pos : pos + 4]
        (size,) = struct.unpack_from("<I", data, pos + 4)
        yield fourcc, pos + 8, size
        pos += 8 + size + (size & 1)


def is_printable_fourcc(code: bytes) -> bool:
    """Box and chunk types are four printable ASCII characters."""
    return len(code) == 4 and all(0x20 <= c < 0x7F for c in code)
