"""One JSON error shape for everything: `{"message": ...}`, plus `errors` on 422; the pages
(app/pages) answer an HTML page with the same status instead, which the factory hands over."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from flask import Flask, Response, current_app, jsonify, request
from marshmallow import Schema, fields
from sqlalchemy.exc import DBAPIError, OperationalError
from werkzeug.exceptions import HTTPException

from app.access_log import SHARE_LINK_ENVIRON, SecretPaths, redacted_path
from app.exceptions import DomainError
from app.extensions import db
from app.storage import ObjectNotFound, StorageUnavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Handed:
    """What the factory hands the handlers (`register_error_handlers`)."""

    #: The HTML page answering an error of a path (path, status), or None: the JSON shape.
    page: Callable[[str, int], Response | None]
    #: The paths that carry a share link's secret, which a log line must not show.
    secrets: SecretPaths


class ErrorSchema(Schema):
    """Every error answer, as the OpenAPI document shows it."""

    message = fields.String(required=True)


class ValidationErrorSchema(ErrorSchema):
    """A 422: `errors` names each field key with its messages."""

    errors = fields.Dict(
        keys=fields.String(),
        values=fields.List(fields.String(), metadata={"minItems": 1}),
        required=True,
        metadata={"minProperties": 1},
    )


def _handed() -> Handed:
    return current_app.extensions["errors"]


MESSAGES = {
    400: "Bad request.",
    401: "Unauthenticated.",
    403: "This action is unauthorized.",
    404: "Not found.",
    405: "Method not allowed.",
    413: "The request body is too large.",
    415: "Unsupported media type.",
    416: "The requested range is not satisfiable.",
    429: "Too many requests.",
    500: "Server error.",
    503: "Service unavailable.",
}


def error_response(status: int, message: str, **extra: object) -> Response:
    page = _handed().page(request.path, status)
    if page is not None:
        return page
    response = jsonify({"message": message, **extra})
    response.status_code = status
    return response


def _http_error(exc: HTTPException) -> Response:
    status = exc.code or 500
    message = MESSAGES.get(status, exc.name)
    if status in (400, 413, 429) and exc.description and exc.description != type(exc).description:
        message = exc.description
    if status == 429:
        message = f"Too many requests: {exc.description}. Try again later."
    response = error_response(status, message)
    for name, value in exc.get_headers():
        if name.lower() != "content-type":
            response.headers[name] = value
    return response


def _domain_error(exc: DomainError) -> Response:
    page = _handed().page(request.path, exc.status)
    if page is not None:
        return page
    response = jsonify(exc.body())
    response.status_code = exc.status
    response.headers.update(exc.headers)
    return response


def _path() -> str:
    """The request's path as a log line may show it (no share-link secret)."""
    return redacted_path(request.path, request.environ.get(SHARE_LINK_ENVIRON), _handed().secrets)


def _storage_unavailable(exc: StorageUnavailable) -> Response:
    db.session.rollback()
    log.error("storage unavailable during %s %s: %s", request.method, _path(), exc)
    return error_response(503, "Service unavailable: the file storage cannot be reached.")


def _object_missing(exc: ObjectNotFound) -> Response:
    db.session.rollback()
    log.error("object missing for %s %s: %s", request.method, _path(), exc)
    return error_response(500, "Server error: the stored content of this file is missing.")


def _database_error(exc: DBAPIError) -> Response:
    db.session.rollback()
    if isinstance(exc, OperationalError) or exc.connection_invalidated:
        log.error("database unavailable during %s %s: %s", request.method, _path(), exc)
        return error_response(503, "Service unavailable: the database cannot be reached.")
    log.exception("database error during %s %s", request.method, _path())
    return error_response(500, MESSAGES[500])


def _unexpected(exc: Exception) -> Response:
    db.session.rollback()
    log.exception("unhandled error during %s %s", request.method, _path())
    return error_response(500, MESSAGES[500])


def _log_exception(
    exc_info: tuple[type, BaseException, TracebackType] | tuple[None, None, None],
) -> None:
    """Flask's line for an exception no handler answered (one raised by a handler itself),
    with the path as a log line may show it: Flask's own writes `request.path` as it came."""
    log.error("exception during %s %s", request.method, _path(), exc_info=exc_info)


def register_error_handlers(
    app: Flask, page: Callable[[str, int], Response | None], secrets: SecretPaths
) -> None:
    """`page(path, status)`: the HTML page of an error of `path`, or None where errors are
    JSON (app/pages/errors.py); `secrets`: the paths a log line redacts (app/access_log.py)."""
    app.extensions["errors"] = Handed(page, secrets)
    app.log_exception = _log_exception  # type: ignore[method-assign]
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(DomainError, _domain_error)
    app.register_error_handler(StorageUnavailable, _storage_unavailable)
    app.register_error_handler(ObjectNotFound, _object_missing)
    app.register_error_handler(DBAPIError, _database_error)
    app.register_error_handler(Exception, _unexpected)
