"""The mime types the service stores, and the rejection every rule raises."""

from __future__ import annotations

from filetype.types.audio import Wav

PDF = "application/pdf"
TEXT = "text/plain"
CSV = "text/csv"
JPEG = "image/jpeg"
PNG = "image/png"
GIF = "image/gif"
WEBP = "image/webp"
DOC = "application/msword"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
ZIP = "application/zip"
MP4 = "video/mp4"
WAV: str = Wav.MIME  # DECISIONS: the WAV type is whatever the detector library yields.
OGG = "audio/ogg"
MP3 = "audio/mpeg"
RDF = "application/rdf+xml"
JSON = "application/json"

ALLOWED_MIME_TYPES: frozenset[str] = frozenset(
    {
        PDF,
        TEXT,
        CSV,
        JPEG,
        PNG,
        GIF,
        WEBP,
        DOC,
        DOCX,
        XLSX,
        PPTX,
        ZIP,
        MP4,
        WAV,
        OGG,
        MP3,
        RDF,
        JSON,
    }
)


class UnsupportedFileType(Exception):
    """The content is not one of the allowed types; ``reason`` is a sentence for the client."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
