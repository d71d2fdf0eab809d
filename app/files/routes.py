from __future__ import annotations

import re
import uuid

from flask import current_app, request

from app.auth.guard import current_user, current_user_again, user_rate_key
from app.database import read_without_transaction
from app.docs.openapi import (
    BODY_ERRORS,
    ID_PARAMETER,
    IF_MATCH,
    RATE_LIMIT_HEADERS,
    RECORD_ETAG,
    SERVER,
    VERSION_NUMBER,
    Blueprint,
    download_doc,
    form_body,
    in_query,
    json_body_doc,
    private_cache,
    ref,
)
from app.doi import lookup as doi_lookup
from app.doi import services as doi_services
from app.doi.schemas import DoiFieldsSchema, ReservedDoiSchema
from app.exceptions import ValidationFailed
from app.extensions import db, limiter
from app.files import access, approval, editions, versions, writes
from app.files.downloads import download_response, still_allowed, stored_file_response
from app.files.listing import Listing, Page
from app.files.pagination import list_response, page_envelope
from app.files.schemas import WithReleaseRequestSchema, WithReleaseRequestsSchema
from app.files.uploads import ReceivedUpload, multipart_boundary, receive_upload
from app.files.validation import validated
from app.http import PRIVATE_CACHE, if_match, json_body, load
from app.schemas.fast_dump import FastDump, record_rows
from app.schemas.records import (
    INPUT_ALIASES,
    ContentReplaceFormSchema,
    CreatedFilesSchema,
    CreateMetadataSchema,
    FileUploadFormSchema,
    ListQuerySchema,
    ReplaceFormSchema,
    UpdateSchema,
    created_record_schema,
    dump_update_result,
    file_version_schema,
    record_schema,
)
from app.search.schemas import SearchListQuerySchema
from app.signals import downloaded
from app.storage import Storage

bp = Blueprint(
    "files",
    __name__,
    url_prefix="/api/files",
    tag="Files",
    errors=("Unauthenticated", *SERVER),
    # With DOIs configured `with_dois` adds the DOI's fields to these answers; with
    # RELEASE_APPROVAL=on they name the pending release request.
    extends={
        "FileRecord": (DoiFieldsSchema, WithReleaseRequestSchema),
        "CreatedFileRecord": (DoiFieldsSchema,),
        "FileUpdateResult": (DoiFieldsSchema, WithReleaseRequestSchema),
        "CreatedFiles": (WithReleaseRequestsSchema,),
    },
)


@bp.before_app_request
def require_token() -> None:
    """Every path under /api/files needs a token, even one that matches no route, so an
    anonymous caller learns nothing (not even 404 or 405) before authenticating."""
    if request.path == bp.url_prefix or request.path.startswith(f"{bp.url_prefix}/"):
        read_without_transaction()
        current_user()


FILES_FIELD = re.compile(r"files(\[\d*\])?")
#: What a PATCH answer may show of the fields sent (`dump_update_result`).
ANSWERED = frozenset(UpdateSchema().fields) - {"iab_themen"}

create_schema = CreateMetadataSchema()
update_schema = UpdateSchema()
replace_form_schema = ReplaceFormSchema()
list_query_schema = SearchListQuerySchema()
versions_query_schema = ListQuerySchema(only=("page",))
version_rows = FastDump(file_version_schema)
#: Where a record answer's ETag is documented.
WITH_ETAG = {"ETag": RECORD_ETAG}


def _with_etag(body: dict, record) -> tuple[dict, dict[str, str]]:
    return body, {"ETag": f'"{versions.etag(record)}"'}


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
@bp.doc(operationId="createFiles", requestBody=form_body(FileUploadFormSchema))
@bp.alt_response(
    201,
    schema=CreatedFilesSchema,
    description="One record per uploaded file, in upload order.",
    headers=RATE_LIMIT_HEADERS,
)
@bp.errors(*BODY_ERRORS, "TooManyRequests")
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
    return _created(records), 201


def _created(records: list) -> dict:
    """The answer of a create: the records, and with RELEASE_APPROVAL=on their requests."""
    answer = {"files": with_dois(created_record_schema.dump(records, many=True))}
    if approval.enabled():
        waiting = approval.waiting_for(records)
        answer["release_requests"] = [
            {"record_id": str(record.id), **approval.summary(request, record, draft)}
            for record in records
            if record.id in waiting
            for request, draft in [waiting[record.id]]
        ]
    return answer


@bp.post("/<uuid:record_id>/editions", parameters=[ID_PARAMETER])
@limiter.limit(_upload_rate, key_func=user_rate_key)
@bp.doc(operationId="createFileEdition", requestBody=form_body(FileUploadFormSchema))
@bp.alt_response(
    201, schema=CreatedFilesSchema, description="The new edition.", headers=RATE_LIMIT_HEADERS
)
@bp.errors(*BODY_ERRORS, "NotFound", "Conflict", "TooManyRequests")
def create_edition(record_id: uuid.UUID):
    """Make a new edition of a released record

    Owner or administrator. One file and the metadata of an upload; what is not sent comes from
    the older record (not its embargo). A new record, its owner's, linked `IsNewVersionOf` it,
    with a DOI of its own where the older has one. 409 for an unreleased record.
    """
    caller = current_user()
    older = editions.snapshot(access.find_record(caller, record_id))
    new_id = uuid.uuid4()
    upload = _receive(
        lambda name: FILES_FIELD.fullmatch(name) is not None,
        lambda index: f"files.{index}",
        lambda index: writes.new_object_key(new_id),
        1,
        "files",
    )
    try:
        loaded = validated(
            create_schema,
            upload.fields,
            unreadable=upload.field_errors,
            files=upload.files,
        )
    except ValidationFailed:
        upload.discard(_storage())
        raise
    metadata = editions.metadata(older, loaded, list(upload.fields))
    [record] = writes.create_records(
        older["user_id"], [(new_id, upload.files[0])], metadata, _storage()
    )
    if doi_services.enabled() and doi_lookup.shown(doi_lookup.doi_of(record_id)):
        doi_services.reserve(record, caller.id)
    return _created([record]), 201


@bp.get("")
@bp.doc(operationId="listFiles", parameters=in_query(list_query_schema))
@bp.alt_response(200, schema=ref("FileRecordPage"), description="One page.")
@bp.errors("ValidationFailed")
def list_files():
    """List records

    Your own records (administrators: all), newest first. Filters combine; an empty value switches a
    filter off and unknown parameters are ignored.
    """
    params = load(list_query_schema, request.args.to_dict())
    answer = list_response(Listing.of(current_user(), params), params, record_rows)
    with_dois(answer["data"])
    approval.as_editors_see(answer["data"])
    return answer


@bp.get("/<uuid:record_id>", parameters=[ID_PARAMETER])
@bp.doc(operationId="readFile")
@bp.alt_response(200, schema=record_schema, description="The record.", headers=WITH_ETAG)
@bp.errors("NotFound")
def read_file(record_id: uuid.UUID):
    """Read one record

    The ETag header names the record as it is now; send it back in If-Match with a change.
    """
    record = access.read_record(current_user(), record_id)
    answer = with_dois([record_rows.dump(record)])[0]
    approval.as_editors_see([answer])
    return _with_etag(answer, record)


@bp.get("/<uuid:record_id>/download", parameters=[ID_PARAMETER])
@bp.doc(operationId="downloadFile", **download_doc(private_cache(PRIVATE_CACHE)))
@bp.errors("Forbidden", "NotFound")
def download_file(record_id: uuid.UUID):
    """Download the content

    Non-administrators get 403 while the record is unreleased or under embargo.
    """
    caller = current_user()
    response = download_response(
        request, caller, record_id, _storage(), PRIVATE_CACHE, again=current_user_again()
    )
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
@bp.doc(
    operationId="updateFile", requestBody=json_body_doc(ref("FileUpdate")), parameters=[IF_MATCH]
)
@bp.alt_response(
    200,
    schema=ref("FileUpdateResult"),
    description="The id, the fields sent, and the new updated_at.",
    headers=RATE_LIMIT_HEADERS | WITH_ETAG,
)
@bp.errors(*BODY_ERRORS, "NotFound", "Conflict", "PreconditionFailed", "TooManyRequests")
def update_file(record_id: uuid.UUID):
    """Update metadata

    Owner or administrator; only the fields sent change. With If-Match, only while the record
    is as the client read it (412 otherwise). Rate limited per user. With
    `RELEASE_APPROVAL=on`, `freigabe: true` keeps the record unreleased and opens a release
    request (the answer's `release_request`); on a released record a change of what the
    public sees (a public field, a `sperrfrist` moved earlier) waits for approval in
    `release_request.pending` while the record and the public keep the approved values; a
    field sent back to its approved value no longer waits. Only its submitter supersedes a
    change waiting for approval (409 for anyone else, until it is decided or cancelled).
    """
    body = json_body()
    changes = load(update_schema, body)
    record = writes.update_metadata(current_user(), record_id, changes, if_match(), _storage())
    sent = dict.fromkeys(INPUT_ALIASES.get(name, name) for name in body)
    answer = with_dois([dump_update_result(record, [name for name in sent if name in ANSWERED])])[0]
    if approval.enabled():
        answer["release_request"] = approval.summary(approval.pending_request(record.id), record)
    return _with_etag(answer, record)


@bp.post("/<uuid:record_id>/content", parameters=[ID_PARAMETER])
@limiter.limit(_upload_rate, key_func=user_rate_key)
@bp.doc(
    operationId="replaceFileContent",
    requestBody=form_body(ContentReplaceFormSchema),
    parameters=[IF_MATCH],
)
@bp.alt_response(
    200,
    schema=ref("ReplacedFileRecord"),
    description="The full record.",
    headers=RATE_LIMIT_HEADERS | WITH_ETAG,
)
@bp.errors(*BODY_ERRORS, "NotFound", "Conflict", "PreconditionFailed", "TooManyRequests")
def replace_file_content(record_id: uuid.UUID):
    """Replace the content

    Same id, owner, created_at and business metadata; original_name, mime_type, size and
    updated_at change and `version` grows by one. The version it ends is listed at
    /versions, with the optional `change_note` sent beside the file. Its content is deleted
    after success, unless KEEP_RELEASED_VERSIONS is on and it has been public. The same bytes
    again (same SHA-256) change nothing. With If-Match, only while the record is as the client
    read it (412 otherwise, checked before the body is read and again at the commit). Rate
    limited per user (with uploads). With `RELEASE_APPROVAL=on` an unreleased record's pending
    release request is cancelled, and a released record's new content waits for approval
    (`release_request.pending.content`) while the record, its `version` and the public keep
    the approved content; an approver downloads it at /api/release-requests/{id}/content.
    Only its submitter supersedes a change waiting for approval (409 for anyone else).
    """
    caller = current_user()
    expected = if_match()
    # A 404 or a 412 before the body is read.
    record = access.find_record(caller, record_id)
    versions.check_if_match(expected, record)
    upload = _receive(
        lambda name: name == "file",
        lambda index: "file",
        lambda index: writes.new_object_key(record_id),
        1,
        "file",
    )
    try:
        form = validated(
            replace_form_schema,
            upload.fields,
            unreadable={k: v for k, v in upload.field_errors.items() if k == "change_note"},
            files=upload.files,
            file_field="file",
        )
    except ValidationFailed:
        upload.discard(_storage())
        raise
    record = writes.replace_content(
        caller,
        record_id,
        upload.files[0],
        _storage(),
        change_note=form.get("change_note"),
        if_match=expected,
    )
    answer = with_dois([record_schema.dump(record)])[0]
    if approval.enabled():
        answer["release_request"] = approval.summary(approval.pending_request(record.id), record)
    return _with_etag(answer, record)


@bp.get("/<uuid:record_id>/versions", parameters=[ID_PARAMETER])
@bp.doc(operationId="listFileVersions", parameters=in_query(versions_query_schema))
@bp.alt_response(200, schema=ref("FileVersionPage"), description="One page, newest first.")
@bp.errors("NotFound", "ValidationFailed")
def list_versions(record_id: uuid.UUID):
    """List the versions replacements ended

    Owner or administrator (others 404, as for the record). The current version is the
    record itself; each row here is one a replacement ended, newest first.
    """
    params = load(versions_query_schema, request.args.to_dict())
    per_page = current_app.config["PAGE_SIZE"]
    rows, total = versions.history(current_user(), record_id, params["page"], per_page)
    return page_envelope(Page(rows, total, params["page"], per_page, None), version_rows)


@bp.get(
    "/<uuid:record_id>/versions/<int:number>/download", parameters=[ID_PARAMETER, VERSION_NUMBER]
)
@bp.doc(operationId="downloadFileVersion", **download_doc(private_cache(PRIVATE_CACHE)))
@bp.errors("Forbidden", "NotFound")
def download_version(record_id: uuid.UUID, number: int):
    """Download a kept version

    The content of an ended version that was kept (`kept` in its row), by the rules of the
    record's download; a version that was not kept is 404.
    """
    caller = current_user()
    content = versions.kept_content(caller, record_id, number)
    # Like the current content, a kept version in flight ends when the right to it does.
    recheck = still_allowed(current_user_again(), record_id)
    response = stored_file_response(request, content, _storage(), PRIVATE_CACHE, recheck)
    downloaded.send(
        current_app._get_current_object(),  # type: ignore[attr-defined]
        door="account",
        record_id=record_id,
        status=response.status_code,
        user_id=caller.id,
    )
    return response


@bp.delete("/<uuid:record_id>", parameters=[ID_PARAMETER])
@bp.doc(operationId="deleteFile")
@bp.alt_response(204, description="Deleted; no body.")
@bp.errors("NotFound")
def delete_file(record_id: uuid.UUID):
    """Delete record and content"""
    writes.delete_record(current_user(), record_id, _storage())
    return "", 204


def with_dois(answers: list[dict]) -> list[dict]:
    """Add `doi` and `doi_state` to record answers (by their `id`) when DOIs are configured;
    without DOIs the answers keep their fields."""
    if not doi_lookup.configured():
        return answers
    found = doi_lookup.dois_of(uuid.UUID(answer["id"]) for answer in answers)
    for answer in answers:
        doi = found.get(uuid.UUID(answer["id"]))
        shown = doi_lookup.shown(doi)
        answer["doi"] = shown
        answer["doi_state"] = doi.wanted if shown is not None and doi is not None else None
    return answers


@bp.post("/<uuid:record_id>/doi", parameters=[ID_PARAMETER])
@limiter.limit(_write_rate, key_func=user_rate_key)
@bp.doc(operationId="reserveFileDoi")
@bp.alt_response(
    201,
    schema=ReservedDoiSchema,
    description="The DOI reserved; DataCite gets its draft from the outbox.",
    headers=RATE_LIMIT_HEADERS,
)
@bp.errors("NotFound", "Conflict", "TooManyRequests")
def reserve_doi(record_id: uuid.UUID):
    """Reserve a DOI

    Owner or administrator (others 404, as for the record); only with DOIs configured
    (`DATACITE_*`, else 404). The DOI is the prefix and a random, meaningless suffix; it is
    registered as findable once the record is public, hidden when it leaves public view. A
    record has one DOI: a second reservation is 409 naming it.
    """
    caller = current_user()
    if not doi_services.enabled():
        raise doi_services.DoisOff("DOIs are not configured on this service.")
    record = access.find_record(caller, record_id)
    doi = doi_services.reserve(record, caller.id)
    return {"doi": doi.doi, "doi_state": doi.wanted}, 201


@bp.delete("/<uuid:record_id>/doi", parameters=[ID_PARAMETER])
@limiter.limit(_write_rate, key_func=user_rate_key)
@bp.doc(operationId="releaseFileDoi")
@bp.alt_response(204, description="Released; no body.", headers=RATE_LIMIT_HEADERS)
@bp.errors("NotFound", "Conflict", "TooManyRequests")
def release_doi(record_id: uuid.UUID):
    """Release a reserved DOI

    Owner or administrator. Only a DOI never registered (its draft at DataCite is deleted
    by the outbox); once registered it stays (409).
    """
    caller = current_user()
    if not doi_services.enabled():
        raise doi_services.DoisOff("DOIs are not configured on this service.")
    record = access.find_record(caller, record_id)
    doi_services.release(record)
    return "", 204
