"""What the pages share for paging: reading a cursor from the address, making the next one."""

from __future__ import annotations

from flask import request

from app.exceptions import DomainError
from app.files.listing import Position
from app.http import external_url
from app.schemas.cursor import decode_cursor


class BadPageRequest(DomainError):
    """Malformed input to a page (a cursor that is no cursor): an HTML 400."""

    status = 400

    def __init__(self) -> None:
        super().__init__("Bad request.")


def cursor_arg(name: str) -> Position | None:
    token = request.args.get(name)
    if token is None:
        return None
    try:
        return decode_cursor(token)
    except (ValueError, UnicodeError):
        raise BadPageRequest() from None


def page_url(path: str, **args: str) -> str:
    keep = [(k, v) for k, v in request.args.items(multi=True) if k == "lang"]
    return external_url(request.script_root + path, [*keep, *args.items()])
