"""Streaming a stored object to the client: conditional requests, single ranges, safe names.

Every header is decided and the storage read is opened before the response is returned, so
errors still become proper answers; the body then streams in chunks from storage.
"""

from __future__ import annotations

import base64
import logging
import unicodedata
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from flask import Request, Response, current_app
from sqlalchemy.exc import SQLAlchemyError

from app import streaming
from app.access_log import OFFLOADED_STATUS_ENVIRON
from app.auth.services import Caller
from app.errors import MESSAGES, error_response
from app.exceptions import DomainError
from app.extensions import db
from app.files.access import LinkHolder, downloadable_record
from app.storage import ObjectNotFound, Storage

# How often a download follows a record to its newer object before giving up.
MAX_REREADS = 5

log = logging.getLogger(__name__)

# The name an offloaded download's Content-Disposition travels to the proxy under.
OFFLOAD_DISPOSITION = "X-Offload-Content-Disposition"

# RFC 8187 attr-char, the characters that need no percent-encoding in filename*.
_ATTR_SAFE = "!#$&+-.^_`|~"


def content_disposition(name: str) -> str:
    """`attachment` with an ASCII fallback and the exact name in RFC 8187 form."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    fallback = (
        "".join("_" if ch in '"\\;%' or not ch.isprintable() else ch for ch in ascii_name).strip()
        or "download"
    )
    encoded = quote(name, safe=_ATTR_SAFE)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}"


def etag_of(record: Any) -> str:
    return record.checksum_sha256


def _range_applies(request: Request, etag: str, units: str) -> bool:
    """Only byte ranges, and with If-Range only when it names the current strong ETag.

    Several ranges are answered with the whole file, which RFC 9110 allows. Without a
    Last-Modified, an If-Range date can never match either.
    """
    if units != "bytes":
        return False
    if_range = request.headers.get("If-Range")
    return if_range is None or if_range.strip() == f'"{etag}"'


def _bounds(range_header: Any, size: int) -> tuple[int, int] | None:
    """The one range's `(start, stop)`; a suffix longer than the file is the whole file
    (RFC 9110 14.1.2), which werkzeug would call unsatisfiable."""
    first, _ = range_header.ranges[0]
    if first < 0 and -first >= size:
        return (0, size)
    return range_header.range_for_length(size)


def offload_prefix(request: Request) -> str | None:
    """The proxy's internal location when it is to send the bytes (DOWNLOAD_OFFLOAD), else
    None: the service streams them itself.

    The proxy applies the client's `Range` as the service would only when the service would
    answer one range or the whole file for lack of one; every other request (a malformed,
    multiple or other-unit range, any `If-Range`) is streamed here, so the answer never
    depends on who sends it. The service answers 304 and 416 itself, before this point.
    """
    if current_app.config.get("DOWNLOAD_OFFLOAD") != "nginx":
        return None
    range_header = request.range
    if request.headers.get("Range") is not None and (
        range_header is None
        or range_header.units != "bytes"
        or len(range_header.ranges) != 1
        or request.headers.get("If-Range") is not None
    ):
        return None
    return current_app.config["DOWNLOAD_OFFLOAD_PREFIX"]


#: How often a streaming download or archive asks whether it may go on (`still_allowed`): the
#: bytes a reader receives after a revocation are those of this long, plus the buffers.
RECHECK_SECONDS = 2.0


def still_allowed(
    again: Callable[[], Caller | LinkHolder | None], record_id: uuid.UUID | None = None
) -> Callable[[], bool]:
    """For a body that streams on after the request: whether the caller as it is now
    (`again()`, which raises a domain error once its token or link is revoked or expired, or
    its account deactivated) may still have it, and may still download the record as it is
    now (`record_id`; an archive checks its members itself). Runs in whatever thread sends
    the body, in an app context of its own. A check the database cannot answer lets the body
    go on (the next one asks again): an outage is not a revocation."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]

    def check() -> bool:
        with app.app_context():
            try:
                caller = again()
                if record_id is not None:
                    downloadable_record(caller, record_id, fresh=True)
                return True
            except DomainError:
                return False
            except SQLAlchemyError:
                log.warning("could not recheck a download in flight; it goes on")
                return True
            finally:
                db.session.remove()

    return check


def download_response(
    request: Request,
    caller: Caller | LinkHolder | None,
    record_id: uuid.UUID,
    storage: Storage,
    cache_control: str,
    again: Callable[[], Caller | LinkHolder | None] | None = None,
) -> Response:
    """Answer a download of a record `caller` (None: the public) may download now.

    Concurrent replaces or a delete can remove the object between reading the record and
    opening the object; the record is then read again from the database, so the client gets
    the newest version (or a 404), never an error for a race it did not cause. A record whose
    key has not changed really has lost its object: that is an error.
    """
    record = downloadable_record(caller, record_id)
    recheck = still_allowed(again or (lambda: caller), record_id)
    for _ in range(MAX_REREADS):
        try:
            return stored_file_response(request, record, storage, cache_control, recheck)
        except ObjectNotFound:
            missing_key = record.stored_path
            db.session.rollback()
            record = downloadable_record(caller, record_id, fresh=True)
            if record.stored_path == missing_key:
                raise
    return stored_file_response(request, record, storage, cache_control, recheck)


def stored_file_response(
    request: Request,
    record: Any,
    storage: Storage,
    cache_control: str,
    still_allowed: Callable[[], bool] | None = None,
) -> Response:
    etag = etag_of(record)
    headers = {
        # RFC 9530: the digest of the whole stored content, also on 206 and 304 answers.
        "Repr-Digest": f"sha-256=:{base64.b64encode(bytes.fromhex(etag)).decode()}:",
        "Content-Disposition": content_disposition(record.original_name),
        "X-Content-Type-Options": "nosniff",
        "Accept-Ranges": "bytes",
        "Cache-Control": cache_control,
    }

    if request.if_none_match and request.if_none_match.contains_weak(etag):
        response = Response(status=304, headers=headers)
        response.set_etag(etag)
        return response

    start, end, status = 0, record.size - 1, 200
    range_header = request.range
    if range_header is not None and _range_applies(request, etag, range_header.units):
        if len(range_header.ranges) == 1:
            bounds = _bounds(range_header, record.size)
            if bounds is None:
                response = error_response(416, MESSAGES[416])
                response.headers.update({**headers, "Content-Range": f"bytes */{record.size}"})
                response.set_etag(etag)
                return response
            start, end, status = bounds[0], bounds[1] - 1, 206
            headers["Content-Range"] = f"bytes {start}-{end}/{record.size}"

    prefix = offload_prefix(request)
    if prefix is not None:
        # The proxy answers the same range itself, and says it does.
        headers.pop("Content-Range", None)
        headers.pop("Accept-Ranges")
        # nginx would also keep a Content-Disposition on its own error pages; under this name
        # only its internal location adds it back, to what it sends successfully.
        headers[OFFLOAD_DISPOSITION] = headers.pop("Content-Disposition")
        response = Response(status=200, headers=headers)
        response.headers["Content-Type"] = record.mime_type
        response.headers["X-Accel-Redirect"] = prefix + storage.offload_location(record.stored_path)
        response.set_etag(etag)
        request.environ[OFFLOADED_STATUS_ENVIRON] = status
        return response

    length = end - start + 1
    reader: Any = storage.open(record.stored_path, start, end, chunk_size=streaming.READ_BYTES)
    if still_allowed is not None:
        reader = streaming.Rechecked(reader, still_allowed, RECHECK_SECONDS)
    response = Response(
        streaming.event_loop_body(request.environ, reader, length),
        status=status,
        headers=headers,
        direct_passthrough=True,  # pragma: no mutate (same bytes either way; docs/mutation.md)
    )
    # Exactly the stored type: no charset is appended to text types.
    response.headers["Content-Type"] = record.mime_type
    response.content_length = length
    response.set_etag(etag)
    return response
