from __future__ import annotations

import re
import uuid
from typing import Any

from flask import current_app, request
from sqlalchemy import Row

from app.auth.guard import current_user, user_rate_key
from app.downloads import download_response
from app.exceptions import ValidationFailed
from app.extensions import db, limiter
from app.files import bp, services
from app.files.uploads import ReceivedUpload, multipart_boundary, receive_upload
from app.http import json_body, load, validate
from app.pagination import list_response
from app.schemas import (
    INPUT_ALIASES,
    CreateMetadataSchema,
    UpdateSchema,
    created_record_schema,
    dump_update_result,
    record_rows,
    record_schema,
)
from app.search.schemas import SearchListQuerySchema
from app.storage import Storage

FILES_FIELD = re.compile(r"files(\[\d*\])?")
PRIVATE_CACHE = "private, no-store"

create_schema = CreateMetadataSchema()
update_schema = UpdateSchema()
list_query_schema = SearchListQuerySchema()


def _storage() -> Storage:
    return current_app.extensions["storage"]


def _upload_rate() -> str:
    return current_app.config["RATELIMIT_UPLOADS"]


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
def create_files():
    # Read before the body streams: afterwards nothing may need the database until the
    # records are inserted, or a failure there could leave the stored objects behind.
    owner_id = current_user().id
    max_files = current_app.config["MAX_FILES_PER_REQUEST"]
    record_ids = [uuid.uuid4() for _ in range(max_files)]
    upload = _receive(
        lambda name: FILES_FIELD.fullmatch(name) is not None,
        lambda index: f"files.{index}",
        lambda index: services.new_object_key(record_ids[index]),
        max_files,
        "files",
    )
    metadata, metadata_errors = validate(create_schema, upload.fields)
    metadata_errors = upload.field_errors | metadata_errors
    records = services.create_records(
        owner_id, record_ids, upload, metadata, metadata_errors, _storage(), max_files
    )
    return {"files": created_record_schema.dump(records, many=True)}, 201


@bp.get("")
def list_files():
    params = load(list_query_schema, request.args.to_dict())
    return list_response(services.Listing.of(current_user(), params), params, record_rows)


@bp.get("/<uuid:record_id>")
def read_file(record_id: uuid.UUID):
    return record_rows.dump(services.read_record(current_user(), record_id))


@bp.get("/<uuid:record_id>/download")
def download_file(record_id: uuid.UUID):
    user = current_user()

    def load() -> Row[Any]:
        record = services.read_record(user, record_id)
        services.ensure_downloadable(
            record,
            is_admin=user.is_admin,
            today=services.today_in(current_app.config["APP_TIMEZONE"]),
        )
        return record

    return download_response(request, load, _storage(), PRIVATE_CACHE)


@bp.patch("/<uuid:record_id>")
def update_file(record_id: uuid.UUID):
    body = json_body()
    changes = load(update_schema, body)
    record = services.find_record(services.visible_to(current_user()), record_id, lock=True)
    record = services.update_metadata(record, changes)
    sent = dict.fromkeys(INPUT_ALIASES.get(name, name) for name in body)
    return dump_update_result(record, [name for name in sent if name in changes])


@bp.post("/<uuid:record_id>/content")
@limiter.limit(_upload_rate, key_func=user_rate_key)
def replace_file_content(record_id: uuid.UUID):
    query = services.visible_to(current_user())
    services.find_record(query, record_id)
    upload = _receive(
        lambda name: name == "file",
        lambda index: "file",
        lambda index: services.new_object_key(record_id),
        1,
        "file",
    )
    record = services.replace_content(query, record_id, upload, _storage())
    return record_schema.dump(record)


@bp.delete("/<uuid:record_id>")
def delete_file(record_id: uuid.UUID):
    services.delete_record(services.visible_to(current_user()), record_id, _storage())
    return "", 204
