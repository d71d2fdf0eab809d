"""Audio and video rules: WAV, Ogg (Vorbis/Opus only), MP4 (MPEG-4 brands only) and MP3."""

from __future__ import annotations

import binascii
import re
import struct
from dataclasses import dataclass

from .mime import MP3, MP4, OGG, WAV, UnsupportedFileType
from .sample import OutsideSample, Sample
from .structure import is_printable_fourcc, iter_riff_chunks

# --- WAV --------------------------------------------------------------------------------------


def detect_wav(sample: Sample) -> str | None:
    """WAV: RIFF/WAVE with a plausible fmt chunk before any sample data."""
    head = sample.head
    if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    for fourcc, offset, size in iter_riff_chunks(head, 12, len(head)):
        if fourcc == b"data":
            break
        if fourcc == b"fmt ":
            fmt = head[offset : offset + 16]
            if size < 16 or len(fmt) < 16:
                break
            format_tag, channels, rate, _byte_rate, block_align = struct.unpack_from("<HHIIH", fmt)
            if format_tag == 0 or channels == 0 or rate == 0 or block_align == 0:
                raise UnsupportedFileType("The WAV audio file has an invalid format chunk.")
            return WAV
    raise UnsupportedFileType("The WAV audio file has no valid format chunk.")


# --- Ogg --------------------------------------------------------------------------------------

_OGG_CAPTURE = b"OggS"
_OGG_BOS = 0x02
_OGG_AUDIO_CODECS = (b"\x01vorbis", b"OpusHead")
_BIT_REVERSED = bytes(int(f"{i:08b}"[::-1], 2) for i in range(256))


def _ogg_crc(page: bytes) -> int:
    """Ogg's CRC-32 (polynomial 0x04C11DB7, not reflected, no xor), via the C zlib CRC.

    Bit-reversing every input byte, and then the result, maps it onto the reflected CRC-32 that
    binascii computes, which runs in C rather than a Python loop over up to 2 MiB of pages.
    """
    reflected = binascii.crc32(page.translate(_BIT_REVERSED), 0xFFFFFFFF) ^ 0xFFFFFFFF
    return int(f"{reflected:032b}"[::-1], 2)


def detect_ogg(sample: Sample) -> str | None:
    """Ogg: valid pages (capture pattern, CRC) whose logical streams all start as Vorbis/Opus."""
    head = sample.head
    if not head.startswith(_OGG_CAPTURE):
        return None
    pos = 0
    streams = 0
    while pos < len(head):
        if pos + 27 > len(head):
            break
        if head[pos : pos + 4] != _OGG_CAPTURE or head[pos + 4] != 0:
            raise UnsupportedFileType("The Ogg file is damaged (invalid page header).")
        header_type = head[pos + 5]
        segment_count = head[pos + 26]
        segments = head[pos + 27 : pos + 27 + segment_count]
        body = pos + 27 + segment_count
        end = body + sum(segments)
        if len(segments) < segment_count or end > len(head):
            break
        page = bytearray(head[pos:end])
        (crc,) = struct.unpack_from("<I", page, 22)
        page[22:26] = b"\0\0\0\0"
        if _ogg_crc(bytes(page)) != crc:
            raise UnsupportedFileType("The Ogg file is damaged (page checksum mismatch).")
        if header_type & _OGG_BOS:
            _check_ogg_stream_start(head[body : body + 8])
            streams += 1
        pos = end
    if pos < len(head) and len(head) == sample.size:
        raise UnsupportedFileType("The Ogg file is damaged (truncated page).")
    if streams == 0:
        raise UnsupportedFileType("The Ogg file has no stream header.")
    return OGG


def _check_ogg_stream_start(packet: bytes) -> None:
    if packet.startswith(_OGG_AUDIO_CODECS):
        return
    if packet.startswith(b"\x80theora"):
        raise UnsupportedFileType("Ogg video (Theora) is not allowed.")
    raise UnsupportedFileType("Ogg files other than Vorbis or Opus audio are not allowed.")


# --- ISO base media (MP4) ---------------------------------------------------------------------

_MP4_BRANDS = frozenset(
    {
        b"isom",
        b"iso2",
        b"iso3",
        b"iso4",
        b"iso5",
        b"iso6",
        b"mp41",
        b"mp42",
        b"avc1",
        b"M4V ",
        b"dash",
    }
)
_M4A_BRANDS = frozenset({b"M4A ", b"M4B ", b"M4P "})
_HEIF_BRANDS = frozenset(
    {
        b"heic",
        b"heix",
        b"heim",
        b"heis",
        b"hevc",
        b"hevx",
        b"hevm",
        b"hevs",
        b"mif1",
        b"mif2",
        b"msf1",
        b"avif",
        b"avis",
        b"avio",
    }
)
_QUICKTIME_LEADING_BOXES = frozenset({b"moov", b"mdat", b"wide", b"pnot", b"skip", b"free"})
_MAX_TOP_LEVEL_BOXES = 100_000


def detect_isobmff(sample: Sample) -> str | None:
    """MP4: an ftyp box with an MPEG-4 major brand, then well-formed top-level boxes."""
    head = sample.head
    box_type = head[4:8]
    if box_type != b"ftyp":
        if box_type in _QUICKTIME_LEADING_BOXES and _looks_like_old_quicktime(sample):
            raise UnsupportedFileType("QuickTime movies are not allowed.")
        return None
    (ftyp_size,) = struct.unpack_from(">I", head)
    if not 16 <= ftyp_size <= 4096 or ftyp_size % 4 or ftyp_size > len(head):
        raise UnsupportedFileType("The MP4 file is damaged (invalid ftyp box).")
    _check_major_brand(head[8:12])
    _walk_top_level_boxes(sample, ftyp_size)
    return MP4


def _looks_like_old_quicktime(sample: Sample) -> bool:
    """QuickTime files from before ftyp start with a movie, data or padding box of sane size."""
    head = sample.head
    if len(head) < 16:
        return False
    (size,) = struct.unpack_from(">I", head)
    return 8 <= size <= sample.size and is_printable_fourcc(head[12:16])


def _check_major_brand(brand: bytes) -> None:
    if brand in _MP4_BRANDS:
        return
    if brand in _M4A_BRANDS:
        raise UnsupportedFileType("M4A audio files are not allowed.")
    if brand == b"qt  ":
        raise UnsupportedFileType("QuickTime movies are not allowed.")
    if brand.startswith(b"3g"):
        raise UnsupportedFileType("3GP videos are not allowed.")
    if brand in _HEIF_BRANDS:
        raise UnsupportedFileType("HEIF and AVIF images are not allowed.")
    shown = brand.decode("latin-1").strip()
    raise UnsupportedFileType(f"ISO media files of brand '{shown}' are not allowed.")


def _walk_top_level_boxes(sample: Sample, pos: int) -> None:
    """Follow box sizes to the end of the file, which must hold a movie box.

    Where a box header falls into the part the sample does not hold, the walk ends undecided.
    """
    seen: set[bytes] = set()
    for _ in range(_MAX_TOP_LEVEL_BOXES):
        if pos == sample.size:
            if not seen & {b"moov", b"moof"}:
                raise UnsupportedFileType("The MP4 file has no movie header.")
            return
        try:
            header = sample.read_at(pos, 16)
        except OutsideSample:
            return
        box_type, size = _box_header(header, sample.size - pos)
        if pos + size > sample.size:
            raise UnsupportedFileType("The MP4 file is truncated.")
        seen.add(box_type)
        pos += size


def _box_header(header: bytes, remaining: int) -> tuple[bytes, int]:
    """Type and total size of the box whose first (up to 16) bytes are ``header``."""
    if len(header) < 8:
        raise UnsupportedFileType("The MP4 file is damaged (truncated box).")
    size, box_type = struct.unpack_from(">I4s", header)
    if not is_printable_fourcc(box_type):
        raise UnsupportedFileType("The MP4 file is damaged (invalid box type).")
    if size == 0:
        return box_type, remaining
    if size == 1:
        if len(header) < 16:
            raise UnsupportedFileType("The MP4 file is damaged (truncated box).")
        (size,) = struct.unpack_from(">Q", header, 8)
        if size < 16:
            raise UnsupportedFileType("The MP4 file is damaged (invalid box size).")
    elif size < 8:
        raise UnsupportedFileType("The MP4 file is damaged (invalid box size).")
    return box_type, size


# --- MP3 --------------------------------------------------------------------------------------

_ID3_MAX_TAGS = 8
_MP3_TAIL_CANDIDATES = 4096
_SYNC = re.compile(rb"\xff[\xe0-\xff]")

# Bitrates in kbit/s by (is MPEG-1, layer); index 0 ("free") and 15 are not accepted.
_BITRATES = {
    (True, 1): (0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448),
    (True, 2): (0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384),
    (True, 3): (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    (False, 1): (0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256),
    (False, 2): (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
    (False, 3): (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}
# Sample rates by the two version bits: 0 = MPEG-2.5, 2 = MPEG-2, 3 = MPEG-1 (1 is reserved).
_SAMPLE_RATES = {0: (11025, 12000, 8000), 2: (22050, 24000, 16000), 3: (44100, 48000, 32000)}


@dataclass(frozen=True, slots=True)
class FrameHeader:
    """The fields of an MPEG audio frame header that tell where the next frame starts."""

    version: int
    layer: int
    sample_rate: int
    length: int

    def continues_with(self, other: FrameHeader) -> bool:
        return (self.version, self.layer, self.sample_rate) == (
            other.version,
            other.layer,
            other.sample_rate,
        )


def parse_frame_header(data: bytes) -> FrameHeader | None:
    """Decode a 4-byte MPEG audio frame header, or None if any index is invalid or reserved."""
    if len(data) < 4 or data[0] != 0xFF or data[1] & 0xE0 != 0xE0:
        return None
    version = (data[1] >> 3) & 0x03
    layer = 4 - ((data[1] >> 1) & 0x03)
    bitrate_index = data[2] >> 4
    rate_index = (data[2] >> 2) & 0x03
    padding = (data[2] >> 1) & 0x01
    emphasis = data[3] & 0x03
    if version == 1 or layer == 4 or bitrate_index in (0, 15) or rate_index == 3 or emphasis == 2:
        return None
    mpeg1 = version == 3
    bitrate = _BITRATES[(mpeg1, layer)][bitrate_index] * 1000
    sample_rate = _SAMPLE_RATES[version][rate_index]
    if layer == 1:
        length = (12 * bitrate // sample_rate + padding) * 4
    elif layer == 3 and not mpeg1:
        length = 72 * bitrate // sample_rate + padding
    else:
        length = 144 * bitrate // sample_rate + padding
    return FrameHeader(version, layer, sample_rate, length)


def _id3v2_length(data: bytes) -> int | None:
    """Total length of an ID3v2 tag starting at data[0], or None if there is no valid tag."""
    if len(data) < 10 or data[:3] != b"ID3" or data[3] not in (2, 3, 4) or data[4] == 0xFF:
        return None
    if any(b & 0x80 for b in data[6:10]):
        return None
    size = data[6] << 21 | data[7] << 14 | data[8] << 7 | data[9]
    footer = 10 if data[3] == 4 and data[5] & 0x10 else 0
    return 10 + size + footer


def detect_mp3(sample: Sample) -> str | None:
    """MP3: optional ID3v2 tags, then an MPEG audio frame whose successor also checks out."""
    pos = 0
    tagged = False
    for _ in range(_ID3_MAX_TAGS):
        try:
            length = _id3v2_length(sample.read_at(pos, 10))
        except OutsideSample:
            length = None
        if length is None:
            break
        pos += length
        tagged = True
    try:
        first = sample.read_at(pos, 4)
    except OutsideSample:
        if _tail_has_frames(sample):
            return MP3
        raise UnsupportedFileType(
            "The MP3 file has an ID3 tag but no audio frame within the part examined."
        ) from None
    if tagged and first.startswith(b"fLaC"):
        raise UnsupportedFileType("FLAC audio is not allowed.")
    header = parse_frame_header(first)
    if header is None:
        if tagged:
            raise UnsupportedFileType("The file has an ID3 tag but no MPEG audio frame after it.")
        return None
    if not _next_frame_fits(sample, pos, header):
        if tagged:
            raise UnsupportedFileType(
                "The MP3 audio is damaged (no valid frame follows the first)."
            )
        return None
    return MP3


def _next_frame_fits(sample: Sample, pos: int, header: FrameHeader) -> bool:
    """True when a valid frame, a trailing tag or the exact end of the file follows the frame.

    A following frame outside the sample cannot be checked and is given the benefit of the doubt.
    """
    following = pos + header.length
    if following == sample.size:
        return True
    try:
        data = sample.read_at(following, 8)
    except OutsideSample:
        return True
    if data.startswith((b"TAG", b"APETAGEX", b"LYRICS")):
        return True
    second = parse_frame_header(data)
    return second is not None and header.continues_with(second)


def _tail_has_frames(sample: Sample) -> bool:
    """Two consecutive frames in the tail, for files whose ID3 tag is longer than the head."""
    tail = sample.tail
    for index, match in enumerate(_SYNC.finditer(tail)):
        if index >= _MP3_TAIL_CANDIDATES:
            break
        start = match.start()
        header = parse_frame_header(tail[start : start + 4])
        if header is None:
            continue
        second = parse_frame_header(tail[start + header.length : start + header.length + 4])
        if second is not None and header.continues_with(second):
            return True
    return False
