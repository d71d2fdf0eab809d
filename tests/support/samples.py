"""Sample files made by real tools, for detection tests and API tests alike.

Formats a Python library writes are generated on the fly (deterministically where the library
allows); formats only ffmpeg, sox, LibreOffice or the JDK write are committed under
``tests/fixtures`` (see its README for the commands). Hostile inputs are real files altered in
the one way the case is about, or minimal hand-built headers where no tool applies.
"""

from __future__ import annotations

import csv
import io
import json
import random
import struct
import time
import wave
import zipfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from PIL import Image

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ZIP_TIME = (2024, 1, 2, 3, 4, 6)

MIME_PDF = "application/pdf"
MIME_TEXT = "text/plain"
MIME_CSV = "text/csv"
MIME_JPEG = "image/jpeg"
MIME_PNG = "image/png"
MIME_GIF = "image/gif"
MIME_WEBP = "image/webp"
MIME_DOC = "application/msword"
MIME_DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
MIME_XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
MIME_PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
MIME_ZIP = "application/zip"
MIME_MP4 = "video/mp4"
MIME_WAV = "audio/x-wav"
MIME_OGG = "audio/ogg"
MIME_MP3 = "audio/mpeg"
MIME_RDF = "application/rdf+xml"
MIME_JSON = "application/json"


def fixture(name: str) -> bytes:
    """The bytes of a committed fixture file."""
    return (FIXTURES / name).read_bytes()


# --- images (Pillow) --------------------------------------------------------------------------


def _image(size: tuple[int, int] = (16, 12)) -> Image.Image:
    from PIL import Image

    image = Image.new("RGB", size, (200, 40, 40))
    for x in range(size[0]):
        image.putpixel((x, x % size[1]), (20, 20, 220))
    return image


def _save(image: Image.Image, image_format: str, **options: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, image_format, **options)
    return buffer.getvalue()


def png_bytes() -> bytes:
    return _save(_image(), "PNG")


def jpeg_bytes() -> bytes:
    return _save(_image(), "JPEG", quality=80)


def gif_bytes() -> bytes:
    return _save(_image().convert("P"), "GIF")


def animated_gif_bytes() -> bytes:
    frames = [_image().convert("P"), _image((16, 12)).rotate(180).convert("P")]
    return _save(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)


def webp_bytes(*, lossless: bool = False, extended: bool = False) -> bytes:
    """Lossy (VP8), lossless (VP8L) or extended (VP8X, via an EXIF block) WebP."""
    options: dict[str, object] = {"lossless": lossless, "quality": 80}
    if extended:
        options["exif"] = b"Exif\x00\x00MM\x00*\x00\x00\x00\x08\x00\x00"
    return _save(_image(), "WEBP", **options)


def pdf_bytes() -> bytes:
    # Fixed dates: Pillow stamps the current time otherwise, and equal calls must give equal bytes.
    fixed = time.gmtime(1_700_000_000)
    return _save(_image(), "PDF", resolution=72.0, creationDate=fixed, modDate=fixed)


# --- office documents (python-docx, openpyxl, python-pptx, xlwt, LibreOffice) ----------------


def docx_bytes() -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("Detection sample", level=1)
    document.add_paragraph("A Word document written by python-docx.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def xlsx_bytes() -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.append(["name", "value"])
    sheet.append(["alpha", 1])
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def pptx_bytes() -> bytes:
    import pptx

    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[0])
    slide.shapes.title.text = "Detection sample"
    buffer = io.BytesIO()
    presentation.save(buffer)
    return buffer.getvalue()


def xls_bytes() -> bytes:
    import xlwt

    workbook = xlwt.Workbook()
    sheet = workbook.add_sheet("Sheet1")
    sheet.write(0, 0, "name")
    sheet.write(0, 1, "value")
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def doc_bytes() -> bytes:
    """A Word 97 document written by LibreOffice."""
    return fixture("note.doc")


def docm_bytes() -> bytes:
    """A macro-enabled Word document written by LibreOffice (content type only, no VBA part)."""
    return fixture("note.docm")


def rewrite_zip(
    data: bytes,
    replace: dict[str, Callable[[bytes], bytes]] | None = None,
    add: dict[str, bytes] | None = None,
) -> bytes:
    """Copy a real archive, transforming some members and appending others."""
    replace = replace or {}
    source = zipfile.ZipFile(io.BytesIO(data))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            content = source.read(info)
            if info.filename in replace:
                content = replace[info.filename](content)
            target.writestr(info, content)
        for name, content in (add or {}).items():
            target.writestr(zipfile.ZipInfo(name, ZIP_TIME), content, zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def _swap(old: bytes, new: bytes) -> Callable[[bytes], bytes]:
    def transform(content: bytes) -> bytes:
        assert old in content
        return content.replace(old, new)

    return transform


_VBA_DEFAULT = b'<Default Extension="bin" ContentType="application/vnd.ms-office.vbaProject"/>'


def xlsm_bytes() -> bytes:
    """An openpyxl workbook turned macro-enabled the way Excel marks it: content types + VBA."""
    return rewrite_zip(
        xlsx_bytes(),
        replace={
            "[Content_Types].xml": lambda content: _swap(
                b"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml",
                b"application/vnd.ms-excel.sheet.macroEnabled.main+xml",
            )(content).replace(b"</Types>", _VBA_DEFAULT + b"</Types>")
        },
        add={"xl/vbaProject.bin": xls_bytes()},
    )


def pptm_bytes() -> bytes:
    """A python-pptx presentation with its main content type made macro-enabled."""
    return rewrite_zip(
        pptx_bytes(),
        replace={
            "[Content_Types].xml": _swap(
                b"application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml",
                b"application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml",
            )
        },
    )


def docx_with_vba_project_bytes() -> bytes:
    """A python-docx document with a VBA project part but untouched content types."""
    return rewrite_zip(docx_bytes(), add={"word/vbaProject.bin": xls_bytes()})


def dotx_bytes() -> bytes:
    """A python-docx document relabelled as a Word template."""
    return rewrite_zip(
        docx_bytes(),
        replace={
            "[Content_Types].xml": _swap(
                b"wordprocessingml.document.main+xml", b"wordprocessingml.template.main+xml"
            )
        },
    )


def odt_bytes() -> bytes:
    """An OpenDocument text written by LibreOffice."""
    return fixture("note.odt")


# --- archives (zipfile, JDK) ------------------------------------------------------------------


def _zip(members: list[tuple[str, bytes]], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in members:
            archive.writestr(zipfile.ZipInfo(name, ZIP_TIME), content, compression)
    return buffer.getvalue()


def zip_bytes() -> bytes:
    return _zip(
        [("readme.txt", b"Hello from a ZIP archive.\n"), ("data/values.csv", b"a,b\n1,2\n")]
    )


def zip64_bytes() -> bytes:
    """An archive with ZIP64 end records, as zipfile writes them past 65,535 members."""
    limit = zipfile.ZIP_FILECOUNT_LIMIT
    zipfile.ZIP_FILECOUNT_LIMIT = 0  # type: ignore[misc]  # write ZIP64 records for 2 members
    try:
        return zip_bytes()
    finally:
        zipfile.ZIP_FILECOUNT_LIMIT = limit  # type: ignore[misc]


def big_zip_bytes(entries: int = 600, entry_size: int = 9000) -> bytes:
    """A ~5 MiB archive of incompressible members: head and tail cannot cover it."""
    rng = random.Random(5)
    return _zip(
        [(f"blobs/blob-{index:05d}.bin", rng.randbytes(entry_size)) for index in range(entries)],
        zipfile.ZIP_STORED,
    )


def epub_bytes() -> bytes:
    """A minimal EPUB 3 container laid out as the OCF specification requires."""
    container = (
        b'<?xml version="1.0"?>\n<container version="1.0" '
        b'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
        b'<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
        b"</rootfiles></container>"
    )
    package = (
        b'<?xml version="1.0"?>\n<package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
        b'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
        b'<dc:identifier id="id">urn:uuid:1</dc:identifier><dc:title>Sample</dc:title>'
        b"<dc:language>en</dc:language></metadata><manifest>"
        b'<item id="c" href="c.xhtml" media-type="application/xhtml+xml"/></manifest>'
        b'<spine><itemref idref="c"/></spine></package>'
    )
    chapter = b'<html xmlns="http://www.w3.org/1999/xhtml"><body><p>Hi</p></body></html>'
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype", ZIP_TIME), b"application/epub+zip")
        for name, content in (
            ("META-INF/container.xml", container),
            ("OEBPS/content.opf", package),
            ("OEBPS/c.xhtml", chapter),
        ):
            archive.writestr(zipfile.ZipInfo(name, ZIP_TIME), content, zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def jar_bytes() -> bytes:
    """A Java archive written by the JDK's jar tool."""
    return fixture("hello.jar")


def apk_bytes() -> bytes:
    """The member layout of an Android package (the Android tool chain is not available)."""
    return _zip(
        [
            ("AndroidManifest.xml", b"\x03\x00\x08\x00" + bytes(60)),
            ("classes.dex", b"dex\n035\x00" + bytes(104)),
            ("resources.arsc", bytes(64)),
        ]
    )


def zip_with_forged_directory_bytes(*, zip64: bool = False) -> bytes:
    """A real archive whose end record claims an enormous central directory and entry count."""
    data = bytearray(zip_bytes())
    end = data.rfind(b"PK\x05\x06")
    if not zip64:
        struct.pack_into("<HHII", data, end + 8, 0xFFFF, 0xFFFF, 0xFFFFFFF0, 0)
        return bytes(data)
    record = data[end:]
    struct.pack_into("<HHII", record, 8, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF)
    zip64_end_offset = end
    zip64_end = struct.pack("<4sQ2H2I4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, 2**62, 2**62, 2**62, 0)
    locator = struct.pack("<4sIQI", b"PK\x06\x07", 0, zip64_end_offset, 1)
    return bytes(data[:end]) + zip64_end + locator + bytes(record)


# --- audio and video (stdlib wave, ffmpeg, sox) -----------------------------------------------


def wav_bytes() -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(8000)
        writer.writeframes(b"".join(struct.pack("<h", (i % 40 - 20) * 800) for i in range(800)))
    return buffer.getvalue()


def mp3_bytes() -> bytes:
    """MP3 with an ID3v2.4 tag, by ffmpeg/LAME."""
    return fixture("tone.mp3")


def mp3_without_tag_bytes() -> bytes:
    return fixture("tone-no-id3.mp3")


def ogg_vorbis_bytes() -> bytes:
    return fixture("tone-vorbis.ogg")


def ogg_opus_bytes() -> bytes:
    return fixture("tone-opus.ogg")


def ogg_theora_bytes() -> bytes:
    return fixture("testsrc-theora.ogv")


def mp4_bytes() -> bytes:
    return fixture("testsrc.mp4")


def m4a_bytes() -> bytes:
    return fixture("tone.m4a")


def mov_bytes() -> bytes:
    return fixture("testsrc.mov")


def threegp_bytes() -> bytes:
    return fixture("testsrc.3gp")


def avif_bytes() -> bytes:
    return fixture("testsrc.avif")


def flac_bytes() -> bytes:
    return fixture("tone.flac")


def id3_tag_bytes() -> bytes:
    """The ID3v2 tag ffmpeg wrote in front of the MP3 fixture."""
    data = mp3_bytes()
    size = data[6] << 21 | data[7] << 14 | data[8] << 7 | data[9]
    return data[: 10 + size]


def flac_with_id3_bytes() -> bytes:
    """A FLAC stream behind an ID3v2 tag, as some taggers write it."""
    return id3_tag_bytes() + flac_bytes()


# --- text -------------------------------------------------------------------------------------


def text_bytes() -> bytes:
    return "Plain notes.\nSecond line with Umlauts: äöü ß.\n".encode()


def latin1_text_bytes() -> bytes:
    return "Grüße aus Köln – café, naïve.\n".encode("cp1252")


def csv_bytes(delimiter: str = ",") -> bytes:
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, delimiter=delimiter)
    writer.writerow(["id", "titel", "autor"])
    writer.writerow([1, "Über Dateien", "Müller, Anna"])
    writer.writerow([2, 'Ein "Zitat"', "Schmidt"])
    return buffer.getvalue().encode()


def json_bytes() -> bytes:
    return json.dumps({"titel": "Beispiel", "autoren": ["Anna", "Jörg"], "seiten": 12}).encode()


def json_array_bytes() -> bytes:
    return json.dumps([{"id": 1}, {"id": 2}], indent=2).encode()


RDF_NAMESPACE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"


def rdf_bytes() -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<rdf:RDF xmlns:rdf="{RDF_NAMESPACE}" xmlns:dc="http://purl.org/dc/elements/1.1/">\n'
        '  <rdf:Description rdf:about="https://example.org/files/1">\n'
        "    <dc:title>Beispiel</dc:title>\n"
        "  </rdf:Description>\n"
        "</rdf:RDF>\n"
    ).encode()


def html_bytes() -> bytes:
    return b"<!DOCTYPE html>\n<html><head><title>x</title></head><body>Hi</body></html>\n"


def svg_bytes() -> bytes:
    return (
        b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">'
        b"<script>alert(1)</script></svg>\n"
    )


def xml_bytes() -> bytes:
    return b'<?xml version="1.0"?>\n<catalog><book id="1">Title</book></catalog>\n'


def billion_laughs_bytes() -> bytes:
    """The entity-expansion bomb, wrapped in an rdf:RDF root."""
    entities = ['<!ENTITY lol0 "lol">'] + [
        f'<!ENTITY lol{level} "{f"&lol{level - 1};" * 10}">' for level in range(1, 10)
    ]
    return (
        '<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF [\n'
        + "\n".join(entities)
        + f'\n]>\n<rdf:RDF xmlns:rdf="{RDF_NAMESPACE}">&lol9;</rdf:RDF>\n'
    ).encode()


def elf_bytes() -> bytes:
    """A complete minimal x86-64 Linux executable (it exits with status 0)."""
    code = b"\xb8\x3c\x00\x00\x00\x31\xff\x0f\x05"
    file_size = 64 + 56 + len(code)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header = ident + struct.pack(
        "<HHIQQQIHHHHHH", 2, 0x3E, 1, 0x400078, 64, 0, 0, 64, 56, 1, 0, 0, 0
    )
    program = struct.pack("<IIQQQQQQ", 1, 5, 0, 0x400000, 0x400000, file_size, file_size, 0x1000)
    return header + program + code


def pe_bytes() -> bytes:
    """A DOS stub and PE/COFF headers of a 64-bit Windows executable."""
    dos = bytearray(0x80)
    dos[:2] = b"MZ"
    struct.pack_into("<I", dos, 0x3C, 0x80)
    dos[0x40:0x67] = b"This program cannot be run in DOS mode."
    coff = struct.pack("<4sHHIIIHH", b"PE\x00\x00", 0x8664, 1, 0, 0, 0, 0xF0, 0x22)
    optional = struct.pack("<H", 0x20B) + bytes(0xF0 - 2)
    section = b".text\x00\x00\x00" + bytes(32)
    return bytes(dos) + coff + optional + section + bytes(512)


def random_bytes(count: int = 4096) -> bytes:
    return random.Random(1234).randbytes(count)


def big_json_bytes(minimum_size: int = 3 * 1024 * 1024) -> bytes:
    """A JSON array larger than the detection head."""
    record = json.dumps({"id": 0, "titel": "Eintrag mit Ümlaut", "tags": ["a", "b"]})
    count = minimum_size // len(record) + 1
    return ("[\n" + ",\n".join([record] * count) + "\n]\n").encode()


# --- the catalogues ---------------------------------------------------------------------------


class AllowedSample(NamedTuple):
    filename: str
    data: bytes
    mime_type: str


@cache
def allowed_samples() -> tuple[AllowedSample, ...]:
    """One real file of each of the 18 allowed types, with its usual name and stored type."""
    return (
        AllowedSample("document.pdf", pdf_bytes(), MIME_PDF),
        AllowedSample("notes.txt", text_bytes(), MIME_TEXT),
        AllowedSample("table.csv", csv_bytes(), MIME_CSV),
        AllowedSample("photo.jpg", jpeg_bytes(), MIME_JPEG),
        AllowedSample("image.png", png_bytes(), MIME_PNG),
        AllowedSample("anim.gif", gif_bytes(), MIME_GIF),
        AllowedSample("image.webp", webp_bytes(), MIME_WEBP),
        AllowedSample("letter.doc", doc_bytes(), MIME_DOC),
        AllowedSample("letter.docx", docx_bytes(), MIME_DOCX),
        AllowedSample("sheet.xlsx", xlsx_bytes(), MIME_XLSX),
        AllowedSample("slides.pptx", pptx_bytes(), MIME_PPTX),
        AllowedSample("bundle.zip", zip_bytes(), MIME_ZIP),
        AllowedSample("clip.mp4", mp4_bytes(), MIME_MP4),
        AllowedSample("tone.wav", wav_bytes(), MIME_WAV),
        AllowedSample("tone.ogg", ogg_vorbis_bytes(), MIME_OGG),
        AllowedSample("tone.mp3", mp3_bytes(), MIME_MP3),
        AllowedSample("graph.rdf", rdf_bytes(), MIME_RDF),
        AllowedSample("data.json", json_bytes(), MIME_JSON),
    )


@cache
def hostile_samples() -> tuple[tuple[str, bytes], ...]:
    """(filename, bytes) of content that must be rejected whatever it is called."""
    png = png_bytes()
    return (
        ("empty.txt", b""),
        ("random.bin", random_bytes()),
        ("page.html", html_bytes()),
        ("page-named.txt", html_bytes()),
        ("drawing.svg", svg_bytes()),
        ("catalog.xml", xml_bytes()),
        ("bomb.rdf", billion_laughs_bytes()),
        ("script.txt", b"#!/bin/sh\necho hello\n"),
        ("inline-script.txt", b"Hello\n<script>alert(1)</script>\n"),
        ("index.php.txt", b"<?php echo 'hi'; ?>\n"),
        ("program.bin", elf_bytes()),
        ("setup.exe", pe_bytes()),
        ("book.epub", epub_bytes()),
        ("text.odt", odt_bytes()),
        ("app.jar", jar_bytes()),
        ("app.apk", apk_bytes()),
        ("macro.docm", docm_bytes()),
        ("macro.xlsm", xlsm_bytes()),
        ("macro.pptm", pptm_bytes()),
        ("template.dotx", dotx_bytes()),
        ("sheet.xls", xls_bytes()),
        ("letter-rtf.doc", fixture("note.rtf")),
        ("tone.m4a", m4a_bytes()),
        ("movie.mov", mov_bytes()),
        ("movie.3gp", threegp_bytes()),
        ("picture.avif", avif_bytes()),
        ("video.ogg", ogg_theora_bytes()),
        ("tone.flac", flac_bytes()),
        ("tagged-flac.mp3", flac_with_id3_bytes()),
        ("gif-html.gif", b"GIF89a<html><body><script>alert(1)</script></body></html>"),
        ("png-garbage.png", png[:33] + random_bytes(512)),
        ("forged-directory.zip", zip_with_forged_directory_bytes()),
        ("forged-zip64.zip", zip_with_forged_directory_bytes(zip64=True)),
    )
