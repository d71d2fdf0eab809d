"""Content outside the allow-list is refused with a reason, whatever its name says."""

from __future__ import annotations

import pytest

from tests.support import samples

from .helpers import rejection

HOSTILE = samples.hostile_samples()
DISGUISES = ["", "report.pdf", "notes.txt", "table.csv", "data.json", "letter.doc", "clip.mp4"]


@pytest.mark.parametrize(("filename", "data"), HOSTILE, ids=[name for name, _ in HOSTILE])
def test_hostile_content_is_refused_under_any_name(filename: str, data: bytes) -> None:
    rejection(data, filename)
    for disguise in DISGUISES:
        rejection(data, disguise or None)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (samples.elf_bytes(), "ELF executables are not allowed."),
        (samples.pe_bytes(), "Windows executables are not allowed."),
        (samples.random_bytes(), "The file type could not be recognised."),
        (samples.epub_bytes(), "EPUB e-books are not allowed."),
        (samples.odt_bytes(), "OpenDocument (ODF) files are not allowed."),
        (samples.jar_bytes(), "Java archives (JAR) are not allowed."),
        (samples.apk_bytes(), "Android apps (APK) are not allowed."),
        (samples.docm_bytes(), "Office documents with macros are not allowed."),
        (samples.xlsm_bytes(), "Office documents with macros are not allowed."),
        (samples.pptm_bytes(), "Office documents with macros are not allowed."),
        (samples.docx_with_vba_project_bytes(), "Office documents with macros are not allowed."),
        (
            samples.dotx_bytes(),
            "Office Open XML files other than DOCX, XLSX and PPTX documents are not allowed.",
        ),
        (samples.xls_bytes(), "Excel 97-2003 workbooks (XLS) are not allowed."),
        (samples.m4a_bytes(), "M4A audio files are not allowed."),
        (samples.mov_bytes(), "QuickTime movies are not allowed."),
        (samples.threegp_bytes(), "3GP videos are not allowed."),
        (samples.avif_bytes(), "HEIF and AVIF images are not allowed."),
        (samples.ogg_theora_bytes(), "Ogg video (Theora) is not allowed."),
        (samples.flac_bytes(), "FLAC audio files are not allowed."),
        (samples.flac_with_id3_bytes(), "FLAC audio is not allowed."),
        (
            samples.billion_laughs_bytes(),
            "XML documents with a DOCTYPE declaration are not allowed.",
        ),
    ],
    ids=[
        "elf",
        "pe",
        "random",
        "epub",
        "odt",
        "jar",
        "apk",
        "docm",
        "xlsm",
        "pptm",
        "docx-with-vba-part",
        "dotx",
        "xls",
        "m4a",
        "quicktime",
        "3gp",
        "avif",
        "theora",
        "flac",
        "flac-behind-id3",
        "billion-laughs",
    ],
)
def test_reason_names_what_was_refused(data: bytes, reason: str) -> None:
    assert rejection(data) == reason


def test_gif_header_followed_by_html_is_refused() -> None:
    data = b"GIF89a<html><body><script>alert(1)</script></body></html>"
    assert rejection(data, "image.gif").startswith("The GIF image is damaged")


def test_png_header_followed_by_garbage_is_refused() -> None:
    data = samples.png_bytes()[:33] + b"<html><script>alert(1)</script></html>"
    assert rejection(data, "image.png").startswith("The PNG image is damaged")


def test_empty_file_is_refused() -> None:
    assert rejection(b"", "notes.txt") == "The file is empty."


def test_windows_installer_package_is_refused() -> None:
    """An OLE2 file whose root carries the MSI class id (no tool here writes a real one)."""
    data = bytearray(samples.xls_bytes())
    root = 512 * (1 + int.from_bytes(data[0x30:0x34], "little"))
    data[root + 0x50 : root + 0x60] = bytes.fromhex("84100c0000000000c000000000000046")
    renamed = "MsiTable".encode("utf-16-le")
    for name in ("Workbook", "Book"):
        encoded = name.encode("utf-16-le")
        position = data.find(encoded + b"\x00\x00")
        if position > 0:
            data[position : position + len(encoded)] = renamed[: len(encoded)]
    assert (
        rejection(bytes(data), "setup.msi") == "Windows Installer packages (MSI) are not allowed."
    )
