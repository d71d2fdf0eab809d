"""Deciding the stored mime type of an upload from its sample (and, for text only, its name)."""

from __future__ import annotations

from collections.abc import Callable

import filetype

from .containers import detect_ole2, detect_zip
from .documents import detect_pdf, reject_rtf
from .images import detect_gif, detect_jpeg, detect_png, detect_webp
from .media import detect_isobmff, detect_mp3, detect_ogg, detect_wav
from .mime import ALLOWED_MIME_TYPES, UnsupportedFileType
from .sample import Sample
from .text import classify_text

Detector = Callable[[Sample], str | None]

# Each rule claims content by its signature, then returns a type or raises; None means "not mine".
# Binary rules run before text so that, say, a GIF header in front of HTML is judged as a GIF.
_BINARY_DETECTORS: tuple[Detector, ...] = (
    detect_pdf,
    detect_png,
    detect_gif,
    detect_jpeg,
    detect_webp,
    detect_wav,
    detect_ogg,
    detect_isobmff,
    detect_zip,
    detect_ole2,
    reject_rtf,
    detect_mp3,
)

_SIGNATURE_BYTES = 8192
_KNOWN_NAMES = {
    "exe": "Windows executables",
    "elf": "ELF executables",
    "flac": "FLAC audio files",
    "mov": "QuickTime movies",
    "avi": "AVI videos",
    "mkv": "Matroska videos",
    "webm": "WebM videos",
    "bmp": "BMP images",
    "tif": "TIFF images",
    "ico": "Icon files",
    "psd": "Photoshop images",
    "gz": "gzip archives",
    "bz2": "bzip2 archives",
    "xz": "xz archives",
    "7z": "7-Zip archives",
    "rar": "RAR archives",
    "tar": "tar archives",
    "sqlite": "SQLite databases",
    "wasm": "WebAssembly modules",
    "swf": "Flash files",
    "ps": "PostScript documents",
}


def detect_mime_type(sample: Sample, filename: str | None = None) -> str:
    """The allowed mime type of the sampled content, or UnsupportedFileType with a reason.

    ``filename`` is the client's name; its extension only chooses between text types that the
    content itself supports.
    """
    if sample.size == 0:
        raise UnsupportedFileType("The file is empty.")
    for detector in _BINARY_DETECTORS:
        mime = detector(sample)
        if mime is not None:
            return mime
    mime = classify_text(sample, extension_of(filename))
    if mime is not None:
        return mime
    raise UnsupportedFileType(_describe_unrecognised(sample))


def extension_of(filename: str | None) -> str | None:
    """Lower-case extension of the last path segment of a client file name."""
    if not filename:
        return None
    base = filename.replace("\\", "/").rsplit("/", 1)[-1]
    stem, dot, extension = base.rpartition(".")
    return extension.lower() if dot and stem and extension else None


def _describe_unrecognised(sample: Sample) -> str:
    """Name the refused format when the filetype library knows its signature."""
    kind = filetype.guess(sample.head[:_SIGNATURE_BYTES])
    if kind is None:
        return "The file type could not be recognised."
    if kind.mime in ALLOWED_MIME_TYPES:
        return f"The file looks like {kind.extension.upper()} but its structure is invalid."
    name = _KNOWN_NAMES.get(kind.extension, f"{kind.extension.upper()} files ({kind.mime})")
    return f"{name} are not allowed."
