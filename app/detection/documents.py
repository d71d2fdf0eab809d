"""Signature-only document rules: PDF (accepted when complete) and RTF (always refused)."""

from __future__ import annotations

import re

from .mime import PDF, UnsupportedFileType
from .sample import Sample

_PDF_HEADER = re.compile(rb"%PDF-\d\.\d")
_PDF_EOF_WINDOW = 8 * 1024


def detect_pdf(sample: Sample) -> str | None:
    """PDF: the header at byte 0 and an end-of-file marker within the last 8 KiB."""
    if not sample.head.startswith(b"%PDF-"):
        return None
    if not _PDF_HEADER.match(sample.head):
        raise UnsupportedFileType("The PDF document has an invalid header.")
    if b"%%EOF" not in sample.tail[-_PDF_EOF_WINDOW:]:
        raise UnsupportedFileType("The PDF document is incomplete (no %%EOF at its end).")
    return PDF


def reject_rtf(sample: Sample) -> str | None:
    """RTF is text a word processor executes objects from; it is refused whatever its name."""
    if sample.head.startswith(b"{\\rtf"):
        raise UnsupportedFileType("RTF documents are not allowed.")
    return None
