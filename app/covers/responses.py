"""A cover's picture as an answer: the headers and conditional answers of a download
(app/files/downloads.py: ETag the picture's SHA-256, 304, Range), shown `inline`."""

from __future__ import annotations

import uuid

from flask import Request, Response, current_app

from app.covers import services
from app.exceptions import RecordNotFound
from app.extensions import db
from app.files.access import LinkHolder
from app.files.downloads import OFFLOAD_DISPOSITION, stored_file_response
from app.storage import ObjectNotFound


def picture_response(
    request: Request,
    caller: LinkHolder | None,
    record_id: uuid.UUID,
    width: int,
    ext: str,
    cache_control: str,
) -> Response:
    """The picture, if `caller` (None: the public) may have it now (`services.picture`);
    a cover replaced between the read and the first byte is read again once."""
    storage = current_app.extensions["storage"]
    found = services.picture(caller, record_id, width, ext)
    try:
        response = stored_file_response(request, found, storage, cache_control)
    except ObjectNotFound:
        db.session.rollback()
        again = services.picture(caller, record_id, width, ext)
        if again.stored_path == found.stored_path:
            raise RecordNotFound("This record has no cover.") from None
        response = stored_file_response(request, again, storage, cache_control)
    for name in ("Content-Disposition", OFFLOAD_DISPOSITION):
        if name in response.headers:
            response.headers[name] = "inline" + response.headers[name].removeprefix("attachment")
    return response
