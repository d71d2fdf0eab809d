"""Image rules: the bytes after the magic number must have the structure the header promises.

A bare signature is cheap to forge (a GIF header in front of an HTML page), so each format is
walked block by block as far as the sample reaches.
"""

from __future__ import annotations

import struct
import zlib

from .mime import GIF, JPEG, PNG, WEBP, UnsupportedFileType
from .sample import Sample
from .structure import is_printable_fourcc, iter_riff_chunks

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_IEND_CHUNK = b"\x00\x00\x00\x00IEND\xaeB`\x82"
_PNG_BIT_DEPTHS = {0: {1, 2, 4, 8, 16}, 2: {8, 16}, 3: {1, 2, 4, 8}, 4: {8, 16}, 6: {8, 16}}

_GIF_SIGNATURES = (b"GIF87a", b"GIF89a")
_GIF_TRAILER = 0x3B
_GIF_EXTENSION = 0x21
_GIF_IMAGE = 0x2C

# Markers that carry a frame header (SOFn); C4 (DHT), C8 (JPG) and CC (DAC) do not.
_JPEG_SOF_MARKERS = frozenset(
    {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
)
_JPEG_SOS = 0xDA
_JPEG_STANDALONE = frozenset({0x00, 0x01, 0xD8, 0xD9, *range(0xD0, 0xD8)})

_WEBP_IMAGE_CHUNKS = frozenset({b"VP8 ", b"VP8L", b"ANMF"})


def _damaged(kind: str, detail: str) -> UnsupportedFileType:
    return UnsupportedFileType(f"The {kind} image is damaged ({detail}).")


def detect_png(sample: Sample) -> str | None:
    """PNG: IHDR first, then chunks with valid types and CRCs up to IEND or the end of the head."""
    head = sample.head
    if not head.startswith(PNG_SIGNATURE):
        return None
    pos = len(PNG_SIGNATURE)
    first = True
    seen_idat = False
    while True:
        if pos + 12 > len(head):
            if len(head) == sample.size:
                raise _damaged("PNG", "it ends before its IEND chunk")
            break
        length, chunk_type = struct.unpack_from(">I4s", head, pos)
        if length > 0x7FFFFFFF or not chunk_type.isalpha():
            raise _damaged("PNG", "invalid chunk header")
        if first and (chunk_type != b"IHDR" or length != 13):
            raise _damaged("PNG", "the first chunk is not IHDR")
        end = pos + 12 + length
        if end > sample.size:
            raise _damaged("PNG", "a chunk runs past the end of the file")
        if end > len(head):
            break
        data = head[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack_from(">I", head, pos + 8 + length)
        if zlib.crc32(chunk_type + data) != crc:
            raise _damaged("PNG", f"bad CRC in chunk {chunk_type.decode('ascii')}")
        if first:
            _check_ihdr(data)
            first = False
        if chunk_type == b"IDAT":
            seen_idat = True
        elif chunk_type == b"IEND":
            if not seen_idat:
                raise _damaged("PNG", "no image data")
            if end != sample.size:
                raise _damaged("PNG", "data after the IEND chunk")
            return PNG
        pos = end
    if not sample.tail.endswith(_PNG_IEND_CHUNK):
        raise _damaged("PNG", "it does not end with an IEND chunk")
    return PNG


def _check_ihdr(data: bytes) -> None:
    width, height, depth, colour, compression, filter_method, interlace = struct.unpack(
        ">IIBBBBB", data
    )
    if not (0 < width < 2**31 and 0 < height < 2**31):
        raise _damaged("PNG", "invalid dimensions")
    if depth not in _PNG_BIT_DEPTHS.get(colour, ()):
        raise _damaged("PNG", "invalid colour type or bit depth")
    if compression != 0 or filter_method != 0 or interlace not in (0, 1):
        raise _damaged("PNG", "invalid compression, filter or interlace method")


def detect_gif(sample: Sample) -> str | None:
    """GIF: screen descriptor, colour table, then only extensions, images and the trailer."""
    head = sample.head
    if head[:6] not in _GIF_SIGNATURES:
        return None
    if len(head) < 13:
        raise _damaged("GIF", "truncated header")
    width, height, packed = struct.unpack_from("<HHB", head, 6)
    if width == 0 or height == 0:
        raise _damaged("GIF", "invalid screen size")
    pos = 13 + _gif_colour_table_size(packed)
    images = 0
    while pos < len(head):
        block = head[pos]
        if block == _GIF_TRAILER:
            if images == 0:
                raise _damaged("GIF", "no image")
            if pos + 1 != sample.size:
                raise _damaged("GIF", "data after the trailer")
            return GIF
        if block == _GIF_EXTENSION:
            pos = _skip_gif_sub_blocks(head, pos + 2)
        elif block == _GIF_IMAGE:
            if pos + 10 > len(head):
                break
            _left, _top, w, h, packed = struct.unpack_from("<HHHHB", head, pos + 1)
            if w == 0 or h == 0:
                raise _damaged("GIF", "invalid image size")
            pos += 10 + _gif_colour_table_size(packed)
            if pos < len(head) and not 1 <= head[pos] <= 11:
                raise _damaged("GIF", "invalid LZW code size")
            pos = _skip_gif_sub_blocks(head, pos + 1)
            images += 1
        else:
            raise _damaged("GIF", "unexpected data between blocks")
    if len(head) == sample.size:
        raise _damaged("GIF", "it ends without a trailer")
    if sample.tail[-1] != _GIF_TRAILER:
        raise _damaged("GIF", "it does not end with a trailer")
    return GIF


def _gif_colour_table_size(packed: int) -> int:
    return 3 << ((packed & 0x07) + 1) if packed & 0x80 else 0


def _skip_gif_sub_blocks(data: bytes, pos: int) -> int:
    """Offset after the terminating empty sub-block, or past the end of ``data``."""
    while pos < len(data):
        length = data[pos]
        pos += 1 + length
        if length == 0:
            return pos
    return max(pos, len(data))


def detect_jpeg(sample: Sample) -> str | None:
    """JPEG: SOI, then length-prefixed marker segments up to the first scan, a frame before it."""
    head = sample.head
    if not head.startswith(b"\xff\xd8\xff"):
        return None
    pos = 2
    seen_frame = False
    while pos + 4 <= len(head):
        if head[pos] != 0xFF:
            raise _damaged("JPEG", "a marker is missing")
        marker = head[pos + 1]
        if marker == 0xFF:
            pos += 1
            continue
        if marker in _JPEG_STANDALONE:
            raise _damaged("JPEG", f"unexpected marker 0x{marker:02X} before the image data")
        (length,) = struct.unpack_from(">H", head, pos + 2)
        if length < 2:
            raise _damaged("JPEG", "invalid segment length")
        if marker == _JPEG_SOS:
            if not seen_frame:
                raise _damaged("JPEG", "image data without a frame header")
            if length < 8:
                raise _damaged("JPEG", "invalid scan header")
            return JPEG
        if marker in _JPEG_SOF_MARKERS:
            segment = head[pos + 4 : pos + 2 + length]
            if len(segment) == length - 2:
                _check_jpeg_frame(segment)
            seen_frame = True
        pos += 2 + length
    if len(head) == sample.size:
        raise _damaged("JPEG", "it ends before the image data")
    return JPEG


def _check_jpeg_frame(segment: bytes) -> None:
    if len(segment) < 6:
        raise _damaged("JPEG", "invalid frame header")
    precision, _height, width, components = struct.unpack_from(">BHHB", segment)
    if precision not in (8, 12, 16) or width == 0 or components == 0:
        raise _damaged("JPEG", "invalid frame header")
    if len(segment) != 6 + 3 * components:
        raise _damaged("JPEG", "invalid frame header length")


def detect_webp(sample: Sample) -> str | None:
    """WebP: RIFF/WEBP whose first chunk is a VP8, VP8L or VP8X header that checks out."""
    head = sample.head
    if head[:4] != b"RIFF" or head[8:12] != b"WEBP":
        return None
    (riff_size,) = struct.unpack_from("<I", head, 4)
    if riff_size < 4 + 8 or len(head) < 20:
        raise _damaged("WebP", "truncated header")
    if riff_size + 8 != sample.size:
        raise _damaged("WebP", "the RIFF size does not match the file size")
    riff_end = riff_size + 8
    chunks = iter_riff_chunks(head, 12, riff_end)
    fourcc, offset, size = next(chunks)
    if offset + size > riff_end:
        raise _damaged("WebP", "a chunk runs past the end of the file")
    data = head[offset : offset + min(size, 32)]
    if fourcc == b"VP8 ":
        _check_vp8(data)
    elif fourcc == b"VP8L":
        _check_vp8l(data)
    elif fourcc == b"VP8X":
        _check_vp8x(data, size)
        seen_image = False
        for chunk_type, chunk_offset, chunk_size in chunks:
            if not is_printable_fourcc(chunk_type):
                raise _damaged("WebP", "invalid chunk type")
            if chunk_offset + chunk_size > riff_end:
                raise _damaged("WebP", "a chunk runs past the end of the file")
            seen_image = seen_image or chunk_type in _WEBP_IMAGE_CHUNKS
        if not seen_image and len(head) == sample.size:
            raise _damaged("WebP", "no image data")
    else:
        raise _damaged("WebP", "unknown first chunk")
    return WEBP


def _check_vp8(data: bytes) -> None:
    if len(data) < 10:
        raise _damaged("WebP", "truncated VP8 header")
    frame_tag = data[0] | data[1] << 8 | data[2] << 16
    key_frame = not frame_tag & 0x01
    version = (frame_tag >> 1) & 0x07
    if not key_frame or version > 3 or data[3:6] != b"\x9d\x01\x2a":
        raise _damaged("WebP", "invalid VP8 header")
    width, height = struct.unpack_from("<HH", data, 6)
    if width & 0x3FFF == 0 or height & 0x3FFF == 0:
        raise _damaged("WebP", "invalid VP8 dimensions")


def _check_vp8l(data: bytes) -> None:
    if len(data) < 5 or data[0] != 0x2F:
        raise _damaged("WebP", "invalid VP8L header")
    (bits,) = struct.unpack_from("<I", data, 1)
    if bits >> 29 != 0:
        raise _damaged("WebP", "unknown VP8L version")


def _check_vp8x(data: bytes, size: int) -> None:
    if size < 10 or len(data) < 10:
        raise _damaged("WebP", "invalid VP8X header")
    width = int.from_bytes(data[4:7], "little") + 1
    height = int.from_bytes(data[7:10], "little") + 1
    if width * height > 2**32 - 1:
        raise _damaged("WebP", "invalid canvas size")
