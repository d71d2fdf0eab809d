"""Hostile files stay harmless (issue 50, point 3): each is drawn in a child process limited
in time and memory; what cannot be drawn within them ends as one log line and a record
without a picture, and requests go on meanwhile. Every file is made here, by hand."""

from __future__ import annotations

import logging
import statistics
import struct
import threading
import time
import zlib
from typing import Any

import pytest

from app.covers import child
from tests.covers.conftest import Covers, raw_pdf
from tests.support import samples
from tests.support.api import Account, Api

FAILED = "not made"


def many_pages(count: int) -> bytes:
    """A PDF of `count` pages in one flat page tree, all sharing one content stream."""
    content = b"0 0 1 rg 10 10 200 200 re f"
    kids = b" ".join(b"%d 0 R" % (4 + i) for i in range(count))
    page = b"<</Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 3 0 R>>"
    return raw_pdf(
        [
            b"<</Type /Catalog /Pages 2 0 R>>",
            b"<</Type /Pages /Kids [" + kids + b"] /Count %d>>" % count,
            b"<</Length %d>>stream\n" % len(content) + content + b"\nendstream",
            *[page] * count,
        ]
    )


def nested_pages(depth: int) -> bytes:
    """A PDF whose one page sits `depth` page-tree nodes deep."""
    nodes = [b"<</Type /Pages /Kids [%d 0 R] /Count 1>>" % (i + 3) for i in range(depth)]
    page = b"<</Type /Page /MediaBox [0 0 595 842]>>"
    return raw_pdf([b"<</Type /Catalog /Pages 2 0 R>>", *nodes, page])


def drawing_itself() -> bytes:
    """A PDF whose page draws a form that draws itself and another that draws it back: the
    renderer recurses until it runs out of memory."""
    form = b"<</Type /XObject /Subtype /Form /BBox [0 0 595 842] "
    form += b"/Resources <</XObject <</X 5 0 R /Y 6 0 R>>>> /Length 15>>stream\n%s\nendstream"
    return raw_pdf(
        [
            b"<</Type /Catalog /Pages 2 0 R>>",
            b"<</Type /Pages /Kids [3 0 R] /Count 1>>",
            b"<</Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
            b"/Resources <</XObject <</X 5 0 R>>>> /Contents 4 0 R>>",
            b"<</Length 5>>stream\n/X Do\nendstream",
            form % b"/X Do /Y Do /X Do",
            form % b"/Y Do /X Do /Y Do",
        ]
    )


def endless_drawing(operations: int = 3_000_000) -> bytes:
    """A PDF whose page (a 200 KB compressed stream) holds millions of fills: drawing it
    takes minutes."""
    content = zlib.compress(b"0 0 1 rg " + b"10 10 m 500 800 l 20 790 l h f\n" * operations, 9)
    return raw_pdf(
        [
            b"<</Type /Catalog /Pages 2 0 R>>",
            b"<</Type /Pages /Kids [3 0 R] /Count 1>>",
            b"<</Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R>>",
            b"<</Length %d /Filter /FlateDecode>>stream\n" % len(content)
            + content
            + b"\nendstream",
        ]
    )


def png_bomb(side: int = 40_000) -> bytes:
    """A valid PNG of side × side black pixels (1 bit each): a few hundred KB that decode to
    gigabytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    row = b"\0" * (1 + side // 8)
    packer = zlib.compressobj(9)
    data = b"".join(packer.compress(row * 1000) for _ in range(side // 1000)) + packer.flush()
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b"")
    )


def garbled_video() -> bytes:
    """The test video with its boxes in place and their contents scrambled: MP4 by its
    structure, nothing ffmpeg can decode."""
    data = bytearray(samples.fixture("testsrc.mp4"))
    position = 0
    while position < len(data):
        (size,) = struct.unpack_from(">I", data, position)
        if data[position + 4 : position + 8] in (b"moov", b"mdat"):
            for i in range(position + 8, position + size):
                data[i] = (data[i] * 7 + 13) % 256
        position += size
    return bytes(data)


def failures(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "app.covers.making"]


def made_within(covers: Covers, seconds: float) -> Any:
    started = time.monotonic()
    worked = covers.make()
    assert time.monotonic() - started < seconds
    return worked


def test_a_pdf_of_100000_pages_is_drawn_from_its_first(api: Api, alice: Account, covers: Covers):
    """PDFium reads the page tree lazily: only the first page is drawn, in a fraction of a
    second and a few tens of MB."""
    record = api.create(alice, "huge.pdf", many_pages(100_000), freigabe="true")
    assert made_within(covers, 20).done == 1
    assert covers.get(record["id"]).status_code == 200


@pytest.mark.parametrize(
    ("name", "body", "reason"),
    [
        ("deep.pdf", lambda: nested_pages(100_000), "PdfiumError"),
        ("bomb.png", png_bomb, "DecompressionBomb"),
        ("broken.mp4", garbled_video, "no frame could be read"),
        ("loop.pdf", drawing_itself, "SIGABRT"),
    ],
    ids=["100000-levels", "decompression-bomb", "malformed-video", "renderer-loop"],
)
def test_a_hostile_file_ends_in_one_log_line_and_no_picture(
    api: Api,
    alice: Account,
    covers: Covers,
    caplog: pytest.LogCaptureFixture,
    name: str,
    body: Any,
    reason: str,
):
    record = api.create(alice, name, body(), freigabe="true")
    caplog.set_level(logging.WARNING)
    worked = made_within(covers, api.app.config["COVER_TIMEOUT_SECONDS"] + 10)
    assert worked.done == 1
    (line,) = failures(caplog)
    assert FAILED in line and record["id"] in line and reason in line, line
    (row,) = covers.rows(record["id"])
    assert row.key is None and row.due_at is None and reason in (row.last_error or "")
    assert covers.keys() == set()
    assert covers.get(record["id"]).status_code == 404
    # Not tried again: it would fail again.
    assert covers.make().done == 0 and len(failures(caplog)) == 1


def test_a_renderer_that_runs_too_long_is_killed_and_requests_go_on(
    api: Api, alice: Account, covers: Covers, caplog: pytest.LogCaptureFixture
):
    # Time runs out first here (its memory grows by a few MB a second).
    api.app.config.update(COVER_TIMEOUT_SECONDS=4, COVER_MEMORY_MB=2048)
    other = api.create(alice, "table.csv", b"a;b\n1;2\n", freigabe="true")

    def read() -> float:
        started = time.monotonic()
        assert api.client.get(f"/api/public/files/{other['id']}").status_code == 200
        return time.monotonic() - started

    before = [read() for _ in range(20)]
    record = api.create(alice, "slow.pdf", endless_drawing(), freigabe="true")
    caplog.set_level(logging.WARNING)
    maker = threading.Thread(target=covers.make)
    started = time.monotonic()
    maker.start()
    time.sleep(0.5)
    during = []
    while maker.is_alive() and len(during) < 200:
        during.append(read())
        time.sleep(0.02)
    maker.join()
    assert time.monotonic() - started < 4 + 5  # killed at its limit
    (line,) = failures(caplog)
    assert "took longer than 4 s" in line and record["id"] in line
    assert covers.get(record["id"]).status_code == 404
    # The drawing ran beside these reads, at a lower priority: they were not held up.
    assert len(during) > 10
    assert statistics.median(during) < max(3 * statistics.median(before), 0.05), (before, during)


def test_the_child_limits_its_memory(tmp_path: Any):
    """A picture that needs more than the limit fails inside the child, which then ends."""
    from app.covers.making import RenderFailed, render

    source = tmp_path / "loop.pdf"
    source.write_bytes(drawing_itself())
    started = time.monotonic()
    with pytest.raises(RenderFailed, match="SIGABRT|memory"):
        render("pdf", source, tmp_path, 30, 256)
    assert time.monotonic() - started < 30
    assert child.names() == ["200.webp", "200.jpg", "1200.webp", "1200.jpg"]
