"""Share links over HTTP: the owner's side (create, list, revoke) and the holder's (read,
download, ZIP), which needs no token, only the link's secret."""

from __future__ import annotations

import uuid
from typing import Any

from flask import current_app, request

from app.archives.responses import archive_ok, archive_response
from app.auth.guard import current_user, user_rate_key
from app.docs.openapi import (
    BODY_ERRORS,
    ID_PARAMETER,
    NO_TOKEN,
    RATE_LIMIT_HEADERS,
    SERVER,
    Blueprint,
    download_doc,
    error,
    header,
    in_query,
    json_body_doc,
    private_cache,
)
from app.extensions import limiter
from app.files import access
from app.files.downloads import download_response
from app.files.listing import Listing
from app.files.pagination import list_response, page_envelope
from app.files.relations import SeenLinks
from app.http import base_url, json_body, load
from app.links import services
from app.links.holder import (
    HOLDER_HEADERS,
    PAGE_PREFIX,
    SHARED_PREFIX,
    failures_limited,
    open_link,
    with_holder_headers,
)
from app.links.schemas import (
    CreatedLinkSchema,
    KitInputSchema,
    LinkPageSchema,
    LinkQuerySchema,
    LinkSchema,
    RecordLinkInputSchema,
    SharedPageQuerySchema,
)
from app.models import utcnow
from app.schemas.fast_dump import public_record_rows
from app.schemas.field_types import format_timestamp
from app.stats import count_download

#: The owner's side: every operation needs a token.
bp = Blueprint("links", __name__, tag="Share links", errors=("Unauthenticated", *SERVER))

record_input = RecordLinkInputSchema()
kit_input = KitInputSchema()
link_schema = LinkSchema()
created_schema = CreatedLinkSchema()
query_schema = LinkQuerySchema()
page_query = SharedPageQuerySchema()

LINK_ID = {
    "name": "link_id",
    "in": "path",
    "required": True,
    "description": "The link's id (not its secret).",
    "schema": {"type": "string", "format": "uuid"},
}
SECRET = {
    "name": "secret",
    "in": "path",
    "required": True,
    "description": "The secret of a share link, as its `url` carries it.",
    "schema": {"type": "string"},
}
HOLDER_DOC_HEADERS = {
    name: header(about, {"type": "string", "const": HOLDER_HEADERS[name]})
    for name, about in (
        ("Referrer-Policy", "Never sent on."),
        ("Cache-Control", "Never stored."),
        ("X-Robots-Tag", "Never indexed."),
    )
}
EXPIRED = (
    410,
    error("The link has expired; the message says when: `This link expired at <timestamp>.`"),
)
#: The holder's side: no token, only the link's secret; every answer carries the holder's
#: headers, failures are rate limited.
shared_bp = Blueprint(
    "shared",
    __name__,
    tag="Share links",
    errors=("NotFound", "TooManyRequests", *SERVER, EXPIRED),
    error_headers=HOLDER_DOC_HEADERS,
    security=NO_TOKEN,
)
shared_bp.after_app_request(with_holder_headers)


def _link_rate() -> str:
    return current_app.config["RATELIMIT_LINKS"]


# Each link is a row and an audit entry kept for the trail's retention: creating them, record
# links and press kits alike, draws on one budget per user (issue 36, finding 6).
creation_limited = limiter.shared_limit(_link_rate, scope="link-create", key_func=user_rate_key)


def _max_days() -> int:
    return current_app.config["SHARE_LINK_MAX_DAYS"]


def _dump(row: Any, **extra: Any) -> dict[str, Any]:
    link, email = row
    values = {
        **{name: getattr(link, name) for name in link_schema.fields if hasattr(link, name)},
        "id": str(link.id),
        "record_id": None if link.record_id is None else str(link.record_id),
        "created_by": email,
        "state": services.state(link, utcnow()),
        **extra,
    }
    return (created_schema if extra else link_schema).dump(values)


class _LinkRows:
    """Dumps a page's (link, email) rows as `page_envelope` asks of its rows."""

    def dump(self, rows: list[Any], many: bool = True) -> list[dict[str, Any]]:
        return [_dump(row) for row in rows]


_LINK_ROWS = _LinkRows()


def _per_page() -> int:
    return current_app.config["PAGE_SIZE"]


def _created(link: Any, secret: str) -> tuple[dict[str, Any], int]:
    url = f"{base_url()}{request.script_root}{PAGE_PREFIX}{secret}"
    return _dump((link, current_user().email), url=url), 201


# --- the owner's side ---------------------------------------------------------------------


@bp.post("/api/files/<uuid:record_id>/links", parameters=[ID_PARAMETER])
@creation_limited
@bp.doc(operationId="createFileLink", requestBody=json_body_doc(record_input))
@bp.alt_response(
    201,
    schema=CreatedLinkSchema,
    description="The new link, with its url.",
    headers=RATE_LIMIT_HEADERS,
)
@bp.errors(*BODY_ERRORS, "NotFound", "TooManyRequests")
def create_record_link(record_id: uuid.UUID):
    """Create a share link to a record

    Owner or administrator (anyone else: 404, as for the record). The answer's `url` carries
    the secret and is shown only here. Rate limited per user, with press kits
    (`RATELIMIT_LINKS`).
    """
    data = load(record_input, json_body())
    link, secret = services.create_link(
        current_user(),
        expires_at=data["expires_at"],
        max_days=_max_days(),
        description=data.get("description"),
        record_id=record_id,
    )
    return _created(link, secret)


@bp.get("/api/files/<uuid:record_id>/links", parameters=[ID_PARAMETER])
@bp.doc(operationId="listFileLinks", parameters=in_query(page_query))
@bp.alt_response(200, schema=LinkPageSchema, description="Newest first, without secrets.")
@bp.errors("NotFound", "ValidationFailed")
def list_record_links(record_id: uuid.UUID):
    """A record's share links

    100 a page (`page=`), in the file list's envelope.
    """
    params = load(page_query, request.args.to_dict())
    found = services.links_of_record(current_user(), record_id, params["page"], _per_page())
    return page_envelope(found, _LINK_ROWS)


@bp.delete("/api/files/<uuid:record_id>/links/<uuid:link_id>", parameters=[ID_PARAMETER, LINK_ID])
@bp.doc(operationId="revokeFileLink")
@bp.alt_response(204, description="Revoked: it answers 404 from the next request on.")
@bp.errors("NotFound")
def revoke_record_link(record_id: uuid.UUID, link_id: uuid.UUID):
    """Revoke a record's share link"""
    services.revoke(current_user(), link_id, record_id=record_id)
    return "", 204


@bp.post("/api/links")
@creation_limited
@bp.doc(operationId="createPressKit", requestBody=json_body_doc(kit_input))
@bp.alt_response(
    201,
    schema=CreatedLinkSchema,
    description="The new link, with its url.",
    headers=RATE_LIMIT_HEADERS,
)
@bp.errors(*BODY_ERRORS, "TooManyRequests")
def create_kit():
    """Create a press kit: a share link to a folder

    It covers your records in the folder and below (administrators: everyone's), evaluated at
    each use: records added later appear, moved or deleted ones vanish. Rate limited per user,
    with record links (`RATELIMIT_LINKS`).
    """
    caller = current_user()
    data = load(kit_input, json_body())
    link, secret = services.create_link(
        caller,
        expires_at=data["expires_at"],
        max_days=_max_days(),
        description=data.get("description"),
        path=data["path"],
    )
    return _created(link, secret)


@bp.get("/api/links")
@bp.doc(operationId="listLinks", parameters=in_query(query_schema))
@bp.alt_response(200, schema=LinkPageSchema, description="Newest first, without secrets.")
@bp.errors("ValidationFailed")
def list_links():
    """Your share links

    Record links and press kits you made (administrators: everyone's), 100 a page (`page=`),
    in the file list's envelope.
    """
    caller = current_user()
    params = load(query_schema, request.args.to_dict())
    filters = services.LinkFilters(params.get("record_id"), params.get("path"))
    return page_envelope(
        services.links_of(caller, filters, params["page"], _per_page()), _LINK_ROWS
    )


@bp.delete("/api/links/<uuid:link_id>", parameters=[LINK_ID])
@bp.doc(operationId="revokeLink")
@bp.alt_response(204, description="Revoked: it answers 404 from the next request on.")
@bp.errors("NotFound")
def revoke_link(link_id: uuid.UUID):
    """Revoke a share link

    Its creator, an administrator, or the owner of its record.
    """
    services.revoke(current_user(), link_id)
    return "", 204


# --- the holder's side --------------------------------------------------------------------


@shared_bp.get(f"{SHARED_PREFIX}<secret>", parameters=[SECRET])
@failures_limited
@shared_bp.doc(
    operationId="readSharedLink",
    parameters=in_query(page_query),
    responses={
        "200": {
            "description": "The record, or a page of the kit's records.",
            "content": {"application/json": {"schema": {"type": "object"}}},
            "headers": HOLDER_DOC_HEADERS,
        },
    },
)
@shared_bp.errors("ValidationFailed")
def read_shared(secret: str):
    """What a share link opens

    No token. A record link: the record as the public sees it (with `sperrfrist`) and
    `link_expires_at`. A press kit: a page of such records with `folder` and `link_expires_at`.
    Unknown or revoked: 404 (failures are rate limited per address).
    """
    link = open_link(secret)
    holder = link.holder
    if holder.record_id is not None:
        record = access.read_record(holder, holder.record_id)
        shown = SeenLinks(public_record_rows, holder).dump(record)
        body = {**shown, "link_expires_at": _time(link.expires_at)}
    else:
        params = load(page_query, request.args.to_dict())
        body = list_response(Listing(holder, {}), params, SeenLinks(public_record_rows, holder))
        body.update(folder=holder.path, link_expires_at=_time(link.expires_at))
    services.note_use(link.id, download=False)
    return body


def _time(value: Any) -> str:
    return format_timestamp(value)


@shared_bp.get(
    f"{SHARED_PREFIX}<secret>/files/<uuid:record_id>/download", parameters=[SECRET, ID_PARAMETER]
)
@failures_limited
@shared_bp.doc(
    operationId="downloadSharedFile", **download_doc(private_cache(HOLDER_HEADERS["Cache-Control"]))
)
def download_shared(secret: str, record_id: uuid.UUID):
    """Download a file through a share link

    The content whatever `freigabe` and `sperrfrist` say, as long as the link lives and names
    the record. Another record's id: 404.
    """
    link = open_link(secret)
    response = download_response(
        request,
        link.holder,
        record_id,
        current_app.extensions["storage"],
        HOLDER_HEADERS["Cache-Control"],
        again=lambda: services.resolve(secret).holder,
    )
    whole = request.range is None or request.range.ranges[0][0] == 0
    services.note_use(link.id, download=response.status_code in (200, 206) and whole)
    count_download("link", record_id, response.status_code, None)
    return response


@shared_bp.get(f"{SHARED_PREFIX}<secret>/files.zip", parameters=[SECRET])
@failures_limited
@shared_bp.doc(
    operationId="downloadSharedZip",
    responses={"200": archive_ok(private_cache(HOLDER_HEADERS["Cache-Control"]))},
)
@shared_bp.errors("ValidationFailed")
def download_shared_zip(secret: str):
    """Download a share link's files as one ZIP

    The kit's files (or the one file) as the folder ZIP is built, whatever `freigabe` and
    `sperrfrist` say.
    """
    link = open_link(secret)
    name = link.holder.path or "files"
    response = archive_response(
        link.holder,
        HOLDER_HEADERS["Cache-Control"],
        path="",
        name=name,
        again=lambda: services.resolve(secret).holder,
    )
    services.note_use(link.id, download=True)
    return response
