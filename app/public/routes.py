from __future__ import annotations

import uuid

from flask import current_app, request

from app.database import read_without_transaction
from app.docs.openapi import (
    CACHED,
    ID_PARAMETER,
    NO_TOKEN,
    RECORD_ETAG,
    SERVER,
    VERSION_NUMBER,
    Blueprint,
    download_doc,
    in_query,
    ref,
)
from app.doi import lookup
from app.files import access, answers, versions
from app.files.downloads import download_response, still_allowed, stored_file_response
from app.files.listing import Listing
from app.files.pagination import list_response
from app.files.relations import SeenLinks
from app.http import PUBLIC_CACHE, load
from app.schemas.fast_dump import public_record_rows
from app.schemas.records import public_record_schema
from app.search.schemas import public_list_query_schema as list_query_schema
from app.stats import count_download

bp = Blueprint(
    "public",
    __name__,
    url_prefix="/api/public/files",
    tag="Public",
    errors=SERVER,
    error_headers=CACHED,
    security=NO_TOKEN,
)
bp.before_request(read_without_transaction)
#: Records as the public sees them: no link to a record it may not see.
public_records = SeenLinks(public_record_rows, None)

RECORD_ID = {**ID_PARAMETER, "description": "Unreleased, unknown and malformed ids are all 404."}


@bp.get("")
@bp.doc(operationId="listReleasedFiles", parameters=in_query(list_query_schema))
@bp.alt_response(200, schema=ref("PublicFileRecordPage"), description="One page.", headers=CACHED)
@bp.errors("ValidationFailed")
@answers.cached()
def list_released():
    """List released records

    Released records only, newest first; a `freigabe` parameter is ignored.
    """
    params = load(list_query_schema, request.args.to_dict())
    return list_response(Listing.of(None, params), params, public_records)


@bp.get("/<uuid:record_id>", parameters=[RECORD_ID])
@bp.doc(operationId="readReleasedFile")
@bp.alt_response(
    200,
    schema=public_record_schema,
    description="The record.",
    headers={**CACHED, "ETag": RECORD_ETAG},
)
@bp.errors("NotFound", "Gone")
@lookup.gone_when_withdrawn
def read_released(record_id: uuid.UUID):
    """Read one released record

    An embargo does not hide the metadata. The ETag is the record's (as in the account's
    answers): it changes with every change of the record, a new version included. A record
    with a DOI that left public view is 410, never 404.
    """
    record = access.read_record(None, record_id)
    return public_records.dump(record), {"ETag": f'"{versions.etag(record)}"'}


@bp.get("/<uuid:record_id>/download", parameters=[RECORD_ID])
@bp.doc(operationId="downloadReleasedFile", **download_doc(CACHED["Cache-Control"]))
@bp.errors("Forbidden", "NotFound", "Gone")
@lookup.gone_when_withdrawn
def download_released(record_id: uuid.UUID):
    """Download released content

    403 while the record is under embargo; 410 once a record with a DOI left public view.
    """
    storage = current_app.extensions["storage"]
    response = download_response(request, None, record_id, storage, PUBLIC_CACHE)
    count_download("public", record_id, response.status_code, None)
    return response


@bp.get("/<uuid:record_id>/versions/<int:number>/download", parameters=[RECORD_ID, VERSION_NUMBER])
@bp.doc(operationId="downloadReleasedFileVersion", **download_doc(CACHED["Cache-Control"]))
@bp.errors("Forbidden", "NotFound", "Gone")
@lookup.gone_when_withdrawn
def download_released_version(record_id: uuid.UUID, number: int):
    """Download a kept version of released content

    While the record is publicly downloadable (403 under embargo, 404 unreleased); a version
    whose content was not kept (KEEP_RELEASED_VERSIONS) is 404; 410 once a record with a DOI
    left public view.
    """
    storage = current_app.extensions["storage"]
    content = versions.kept_content(None, record_id, number)
    recheck = still_allowed(lambda: None, record_id)
    response = stored_file_response(request, content, storage, PUBLIC_CACHE, recheck)
    count_download("public", record_id, response.status_code, None)
    return response
