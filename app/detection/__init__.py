"""Content-based type detection for uploads, working on a bounded sample of the bytes.

Only the first ``HEAD_BYTES`` and last ``TAIL_BYTES`` of an upload are kept while it streams;
``detect_mime_type`` decides from those (and the size) which allowed type the content is.
"""

from .detect import detect_mime_type
from .mime import ALLOWED_MIME_TYPES, UnsupportedFileType
from .sample import HEAD_BYTES, TAIL_BYTES, OutsideSample, Sample, SampleCollector

__all__ = [
    "ALLOWED_MIME_TYPES",
    "HEAD_BYTES",
    "TAIL_BYTES",
    "OutsideSample",
    "Sample",
    "SampleCollector",
    "UnsupportedFileType",
    "detect_mime_type",
]
