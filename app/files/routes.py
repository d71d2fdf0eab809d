from __future__ import annotations

import re
import uuid

from flask import current_app, request

from app.auth.guard import current_user, user_rate_key
from app.database import read_without_transaction
from app.docs.openapi import (
    DOWNLOAD_REQUEST_HEADERS,
    ID_PARAMETER,
    RATE_LIMIT_HEADERS,
    SERVER,
    Blueprint,
    download_responses,
    form_body,
    json_body_doc,
    private_cache,
    ref,
)
from app.exceptions import ValidationFailed
from app.extensions import db, limiter
from app.files import access, approval, writes
from app.files.downloads import download_response
from app.files.listing import Listing
from app.files.pagination import list_response
from app.files.uploads import ReceivedUpload, multipart_boundary, receive_upload
from app.files.validation import validated
from app.http import PRIVATE_CACHE, json_body, load
from app.schemas.fast_dump import record_rows
from app.schemas.records import (
    INPUT_ALIASES,
    CreatedFilesSchema,
    CreateMetadataSchema,
    UpdateSchema,
    created_record_schema,
    dump_update_result,
    record_schema,
)
from app.search.schemas import SearchListQuerySchema
from app.signals import downloaded
from app.storage import Storage

bp = Blueprint(
    "files", __name__, url_prefix="/api/files", tag="Files", errors=("Unauthenticated", *SERVER)
)


@bp.before_app_request
def require_token() -> None:
    """Every path under /api/files needs a token, even one that matches no route, so an
    anonymous caller learns nothing (not even 404 or 405) before authenticating."""
    if request.path == bp.url_prefix or request.path.startswith(f"{bp.url_prefix}/"):
        read_without_transaction()
        current_user()


FILES_FIELD = re.compile(r"files(\[\d*\])?")

create_schema = CreateMetadataSchema()
update_schema = UpdateSchema()
list_query_schema = SearchListQuerySchema()


def _storage() -> Storage:
    return current_app.extensions["storage"]


def _upload_rate() -> str:
    return current_app.config["RATELIMIT_UPLOADS"]


def _write_rate() -> str:
    return current_app.config["RATELIMIT_WRITES"]


def _receive(
    is_file_field, error_key, new_key, max_files: int, missing_field: str
) -> ReceivedUpload:
    boundary = multipart_boundary(request.content_type)
    if boundary is None:
        raise ValidationFailed(
            {missing_field: [f"The {missing_field} field is required (multipart/form-data)."]}
        )
    # No transaction (and no pooled connection) stays open while the body streams in.
    db.session.rollback()
    return receive_upload(
        request.stream,
        boundary,
        _storage(),
        is_file_field=is_file_field,
        error_key=error_key,
        new_key=new_key,
        max_file_size=current_app.config["MAX_FILE_SIZE"],
        max_files=max_files,
    )


@bp.post("")
@limiter.limit(_upload_rate, key_func=user_rate_key)
@bp.doc(operationId="createFiles", requestBody=form_body("FileUploadForm"))
@bp.alt_response(
    201,
    schema=CreatedFilesSchema,
    description="One record per uploaded file, in upload order.",
    headers=RATE_LIMIT_HEADERS,
)
@bp.errors("BadRequest", "PayloadTooLarge", "ValidationFailed", "TooManyRequests")
def create_files():
    """Upload files with metadata

    Stores every file or none: one invalid file rejects the whole request (422 on `files.N`). Rate
    limited per user.
    """
    # Read before the body streams: afterwards nothing may need the database until the
    # records are inserted, or a failure there could leave the stored objects behind.
    owner_id = current_user().id
    max_files = current_app.config["MAX_FILES_PER_REQUEST"]
    record_ids = [uuid.uuid4() for _ in range(max_files)]
    upload = _receive(
        lambda name: FILES_FIELD.fullmatch(name) is not None,
        lambda index: f"files.{index}",
        lambda index: writes.new_object_key(record_ids[index]),
        max_files,
        "files",
    )
    try:
        metadata = validated(
            create_schema,
            upload.fields,
            unreadable=upload.field_errors,
            files=upload.files,
            max_files=max_files,
        )
    except ValidationFailed:
        upload.discard(_storage())
        raise
    staged = [(record_ids[file.index], file) for file in upload.files]
    records = writes.create_records(owner_id, staged, metadata, _storage())
    answer = {"files": created_record_schema.dump(records, many=True)}
    if approval.enabled():
        answer["release_requests"] = approval.pending_summaries([r.id for r in records])
    return answer, 201


@bp.get("")
@bp.doc(operationId="listFiles", parameters=[{"in": "query", "schema": list_query_schema}])
@bp.alt_response(200, schema=ref("FileRecordPage"), description="One page.")
@bp.errors("ValidationFailed")
def list_files():
    """List records

    Your own records (administrators: all), newest first. Filters combine; an empty value switches a
    filter off and unknown parameters are ignored.
    """
    params = load(list_query_schema, request.args.to_dict())
    return list_response(Listing.of(current_user(), params), params, record_rows)


@bp.get("/<uuid:record_id>", parameters=[ID_PARAMETER])
@bp.doc(operationId="readFile")
@bp.alt_response(200, schema=record_schema, description="The record.")
@bp.errors("NotFound")
def read_file(record_id: uuid.UUID):
    """Read one record"""
    return record_rows.dump(access.read_record(current_user(), record_id))


@bp.get("/<uuid:record_id>/download", parameters=[ID_PARAMETER])
@bp.doc(
    operationId="downloadFile",
    parameters=DOWNLOAD_REQUEST_HEADERS,
    responses=download_responses(private_cache(PRIVATE_CACHE)),
)
@bp.errors("Forbidden", "NotFound")
def download_file(record_id: uuid.UUID):
    """Download the content

    Non-administrators get 403 while the record is unreleased or under embargo.
    """
    caller = current_user()
    response = download_response(request, caller, record_id, _storage(), PRIVATE_CACHE)
    downloaded.send(
        current_app._get_current_object(),  # type: ignore[attr-defined]
        door="account",
        record_id=record_id,
        status=response.status_code,
        user_id=caller.id,
    )
    return response


@bp.patch("/<uuid:record_id>", parameters=[ID_PARAMETER])
@limiter.limit(_write_rate, key_func=user_rate_key)
@bp.doc(operationId="updateFile", requestBody=json_body_doc(ref("FileUpdate")))
@bp.alt_response(
    200,
    schema=ref("FileUpdateResult"),
    description="The id, the fields sent, and the new updated_at.",
    headers=RATE_LIMIT_HEADERS,
)
@bp.errors(
    "BadRequest",
    "NotFound",
    "Conflict",
    "PayloadTooLarge",
    "ValidationFailed",
    "TooManyRequests",
)
def update_file(record_id: uuid.UUID):
    """Update metadata

    Owner or administrator; only the fields sent change. Rate limited per user. With
    `RELEASE_APPROVAL=on`, `freigabe: true` keeps the record unreleased and opens a release
    request (the answer's `release_request`), a change of what the public sees of a released
    record is 409, and a `sperrfrist` moved earlier on a released record waits for approval.
    """
    body = json_body()
    changes = load(update_schema, body)
    record = writes.update_metadata(current_user(), record_id, changes)
    sent = dict.fromkeys(INPUT_ALIASES.get(name, name) for name in body)
    answer = dump_update_result(record, [name for name in sent if name in changes])
    if approval.enabled():
        answer["release_request"] = approval.summary(approval.pending_request(record.id))
    return answer


@bp.post("/<uuid:record_id>/content", parameters=[ID_PARAMETER])
@limiter.limit(_upload_rate, key_func=user_rate_key)
@bp.doc(operationId="replaceFileContent", requestBody=form_body("ContentReplaceForm"))
@bp.alt_response(
    200, schema=record_schema, description="The full record.", headers=RATE_LIMIT_HEADERS
)
@bp.errors(
    "BadRequest",
    "NotFound",
    "Conflict",
    "PayloadTooLarge",
    "ValidationFailed",
    "TooManyRequests",
)
def replace_file_content(record_id: uuid.UUID):
    """Replace the content

    Same id, owner, created_at and business metadata; original_name, mime_type, size and updated_at
    change. The old content is deleted after success. Rate limited per user (with uploads). With
    `RELEASE_APPROVAL=on` a released record's content is not replaced (409) and an unreleased
    one's pending release request is cancelled.
    """
    caller = current_user()
    # A 404, or with RELEASE_APPROVAL a 409, before the body is read.
    approval.refuse_replacing_released(access.find_record(caller, record_id))
    upload = _receive(
        lambda name: name == "file",
        lambda index: "file",
        lambda index: writes.new_object_key(record_id),
        1,
        "file",
    )
    try:
        validated(None, {}, files=upload.files, file_field="file")
    except ValidationFailed:
        upload.discard(_storage())
        raise
    record = writes.replace_content(caller, record_id, upload.files[0], _storage())
    return record_schema.dump(record)


@bp.delete("/<uuid:record_id>", parameters=[ID_PARAMETER])
@bp.doc(operationId="deleteFile")
@bp.alt_response(204, description="Deleted; no body.")
@bp.errors("NotFound")
def delete_file(record_id: uuid.UUID):
    """Delete record and content"""
    writes.delete_record(current_user(), record_id, _storage())
    return "", 204
