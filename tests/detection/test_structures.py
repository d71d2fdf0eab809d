"""Binary formats must be structurally what their signature claims.

Each case takes a real file and damages it in one specific way.
"""

from __future__ import annotations

import struct
import zlib

import pytest

from app.detection import HEAD_BYTES, Sample, UnsupportedFileType, detect_mime_type
from app.detection.media import parse_frame_header
from tests.support import samples

from .helpers import detect, rejection


def flip(data: bytes, offset: int) -> bytes:
    return data[:offset] + bytes([data[offset] ^ 0xFF]) + data[offset + 1 :]


class TestPng:
    def test_bad_crc_is_refused(self) -> None:
        data = samples.png_bytes()
        idat = data.index(b"IDAT")
        assert "bad CRC in chunk IDAT" in rejection(flip(data, idat + 6))

    def test_bad_ihdr_is_refused(self) -> None:
        data = bytearray(samples.png_bytes())
        data[24] = 3  # bit depth 3 does not exist
        struct.pack_into(">I", data, 29, zlib.crc32(bytes(data[12:29])))
        assert "invalid colour type or bit depth" in rejection(bytes(data))

    def test_data_after_iend_is_refused(self) -> None:
        assert "data after the IEND chunk" in rejection(samples.png_bytes() + b"<html>")

    def test_truncated_image_is_refused(self) -> None:
        data = samples.png_bytes()
        assert "damaged" in rejection(data[: len(data) - 20])

    def test_large_image_is_checked_as_far_as_the_head_reaches(self) -> None:
        data = samples.png_bytes()
        iend = data.rindex(b"IEND") - 4
        chunk = b"x" * (3 * HEAD_BYTES)
        filler = struct.pack(">I", len(chunk)) + b"zzZz" + chunk
        filler += struct.pack(">I", zlib.crc32(b"zzZz" + chunk))
        assert detect(data[:iend] + filler + data[iend:]) == "image/png"
        with pytest.raises(UnsupportedFileType):
            detect(data[:iend] + filler)


class TestGif:
    def test_missing_trailer_is_refused(self) -> None:
        assert "without a trailer" in rejection(samples.gif_bytes()[:-1])

    def test_no_image_is_refused(self) -> None:
        data = samples.gif_bytes()
        colour_table = 3 << ((data[10] & 0x07) + 1)
        assert "no image" in rejection(data[: 13 + colour_table] + b";")

    def test_data_after_trailer_is_refused(self) -> None:
        assert "data after the trailer" in rejection(samples.gif_bytes() + b"<script>")


class TestJpeg:
    def test_truncated_before_image_data_is_refused(self) -> None:
        data = samples.jpeg_bytes()
        sos = data.index(b"\xff\xda")
        assert "ends before the image data" in rejection(data[: sos - 10])

    def test_scan_without_frame_header_is_refused(self) -> None:
        data = samples.jpeg_bytes()
        sof = data.index(b"\xff\xc0")
        length = struct.unpack(">H", data[sof + 2 : sof + 4])[0]
        without_frame = data[:sof] + data[sof + 2 + length :]
        assert "without a frame header" in rejection(without_frame)

    def test_html_after_the_marker_is_refused(self) -> None:
        assert "damaged" in rejection(b"\xff\xd8\xff<html><script>alert(1)</script></html>")


class TestWebp:
    def test_riff_size_must_match(self) -> None:
        assert "RIFF size" in rejection(samples.webp_bytes() + b"\x00\x00")

    def test_broken_vp8_header_is_refused(self) -> None:
        data = samples.webp_bytes()
        start_code = data.index(b"\x9d\x01\x2a")
        assert "invalid VP8 header" in rejection(flip(data, start_code))

    def test_broken_vp8l_signature_is_refused(self) -> None:
        data = samples.webp_bytes(lossless=True)
        assert "invalid VP8L header" in rejection(flip(data, 20))


class TestWav:
    def test_missing_format_chunk_is_refused(self) -> None:
        data = samples.wav_bytes()
        without_fmt = data[:12] + data[data.index(b"data") :]
        assert rejection(without_fmt) == "The WAV audio file has no valid format chunk."

    def test_other_riff_forms_are_not_wav(self) -> None:
        data = samples.wav_bytes()
        avi = data[:8] + b"AVI " + data[12:]
        assert rejection(avi) == "AVI videos are not allowed."


class TestOgg:
    def test_page_checksum_is_verified(self) -> None:
        data = samples.ogg_vorbis_bytes()
        assert "checksum" in rejection(flip(data, 200))

    def test_truncated_stream_is_refused(self) -> None:
        data = samples.ogg_opus_bytes()
        assert "truncated" in rejection(data[:-10])


class TestMp4:
    def test_unknown_major_brand_is_refused(self) -> None:
        data = samples.mp4_bytes()
        assert rejection(data[:8] + b"abcd" + data[12:]) == (
            "ISO media files of brand 'abcd' are not allowed."
        )

    @pytest.mark.parametrize("brand", [b"iso5", b"mp42", b"avc1", b"M4V ", b"dash"])
    def test_mpeg4_major_brands_are_mp4(self, brand: bytes) -> None:
        data = samples.mp4_bytes()
        assert detect(data[:8] + brand + data[12:]) == "video/mp4"

    @pytest.mark.parametrize("brand", [b"heic", b"mif1", b"avif"])
    def test_heif_brands_are_refused(self, brand: bytes) -> None:
        data = samples.mp4_bytes()
        assert rejection(data[:8] + brand + data[12:]) == "HEIF and AVIF images are not allowed."

    def test_quicktime_without_file_type_box_is_refused(self) -> None:
        data = samples.mov_bytes()
        ftyp_size = struct.unpack(">I", data[:4])[0]
        assert rejection(data[ftyp_size:]) == "QuickTime movies are not allowed."

    def test_truncated_file_is_refused(self) -> None:
        data = samples.mp4_bytes()
        assert rejection(data[: len(data) // 2]) == "The MP4 file is truncated."

    def test_file_without_movie_box_is_refused(self) -> None:
        ftyp_size = struct.unpack(">I", samples.mp4_bytes()[:4])[0]
        data = samples.mp4_bytes()[:ftyp_size] + struct.pack(">I", 16) + b"mdat" + bytes(8)
        assert rejection(data) == "The MP4 file has no movie header."


class TestMp3:
    def test_garbage_after_id3_tag_is_refused(self) -> None:
        data = samples.id3_tag_bytes() + b"<html><script>alert(1)</script></html>"
        assert rejection(data) == "The file has an ID3 tag but no MPEG audio frame after it."

    def test_broken_second_frame_is_refused(self) -> None:
        data = samples.mp3_bytes()
        tag = len(samples.id3_tag_bytes())
        first = parse_frame_header(data[tag : tag + 4])
        assert first is not None
        second = tag + first.length
        assert parse_frame_header(data[second : second + 4]) is not None
        assert "damaged" in rejection(data[:second] + b"\x00\x00" + data[second + 2 :])

    def test_id3_tag_longer_than_the_head_is_checked_in_the_tail(self) -> None:
        audio = samples.mp3_without_tag_bytes() * 20
        padding = 3 * HEAD_BYTES // 2
        size = padding
        syncsafe = bytes(
            [(size >> 21) & 0x7F, (size >> 14) & 0x7F, (size >> 7) & 0x7F, size & 0x7F]
        )
        data = b"ID3\x04\x00\x00" + syncsafe + bytes(padding) + audio
        assert detect(data) == "audio/mpeg"
        with pytest.raises(UnsupportedFileType, match="no audio frame"):
            detect(b"ID3\x04\x00\x00" + syncsafe + bytes(padding) + samples.random_bytes(2 << 20))


class TestPdf:
    def test_missing_end_marker_is_refused(self) -> None:
        data = samples.pdf_bytes().replace(b"%%EOF", b"%%EOX")
        assert "no %%EOF" in rejection(data, "report.pdf")

    def test_end_marker_must_be_in_the_last_8_kib(self) -> None:
        data = samples.pdf_bytes() + b"\n" * 9000
        assert "no %%EOF" in rejection(data, "report.pdf")
        assert detect(samples.pdf_bytes() + b"\n" * 8000) == "application/pdf"

    def test_invalid_header_is_refused(self) -> None:
        assert "invalid header" in rejection(b"%PDF-x\n%%EOF\n")


class TestZip:
    def test_truncated_archive_is_refused(self) -> None:
        data = samples.zip_bytes()
        assert "damaged" in rejection(data[:-30])

    def test_data_after_the_end_record_is_refused(self) -> None:
        assert "damaged" in rejection(samples.zip_bytes() + b"trailing")

    def test_multi_part_archives_are_refused(self) -> None:
        data = bytearray(samples.zip_bytes())
        end = data.rindex(b"PK\x05\x06")
        struct.pack_into("<H", data, end + 4, 1)
        assert rejection(bytes(data)) == "Multi-part (split) ZIP archives are not allowed."

    def test_empty_archive_is_a_zip(self) -> None:
        assert detect(b"PK\x05\x06" + bytes(18)) == "application/zip"

    def test_zip64_archive_is_read(self) -> None:
        data = samples.zip64_bytes()
        assert b"PK\x06\x06" in data and b"PK\x06\x07" in data
        assert detect(data) == "application/zip"

    def test_member_names_decide_when_content_types_are_unreadable(self) -> None:
        data = samples.rewrite_zip(
            samples.docx_bytes(), replace={"[Content_Types].xml": lambda _: b"<Types"}
        )
        assert detect(data) == samples.MIME_DOCX

    def test_office_document_without_main_part_is_refused(self) -> None:
        data = samples.rewrite_zip(
            samples.xlsx_bytes(),
            replace={"xl/workbook.xml": lambda content: content},
        ).replace(b"xl/workbook.xml", b"xl/workbook.xmz")
        with pytest.raises(UnsupportedFileType):
            detect(data)


class TestOle2:
    def test_truncated_compound_file_is_refused(self) -> None:
        data = samples.doc_bytes()
        assert rejection(data[:1024]) == "The legacy Office (OLE2) file is damaged."

    def test_directory_outside_the_sample_is_refused_with_a_reason(self) -> None:
        data = samples.doc_bytes()
        size = 10 * HEAD_BYTES
        sample = Sample(head=data[:512], tail=data[-512:], size=size)
        with pytest.raises(UnsupportedFileType, match="beyond the part of the file examined"):
            detect_mime_type(sample)

    def test_cyclic_directory_chain_is_refused(self) -> None:
        data = bytearray(samples.doc_bytes())
        first_directory = int.from_bytes(data[0x30:0x34], "little")
        first_fat = int.from_bytes(data[0x4C:0x50], "little")
        entry = 512 * (first_fat + 1) + 4 * first_directory
        data[entry : entry + 4] = first_directory.to_bytes(4, "little")
        # Point the root's child at a directory entry beyond the first sector.
        root = 512 * (first_directory + 1)
        data[root + 0x4C : root + 0x50] = (40).to_bytes(4, "little")
        assert rejection(bytes(data)) == "The legacy Office (OLE2) file is damaged."

    def test_wrong_byte_order_mark_is_refused(self) -> None:
        data = samples.doc_bytes()
        assert "damaged" in rejection(data[:0x1C] + b"\xff\xff" + data[0x1E:])
