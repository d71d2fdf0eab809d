from __future__ import annotations

from flask import Response, current_app, request
from marshmallow import EXCLUDE, Schema

from app import streaming
from app.archives import bp, services
from app.auth.guard import current_user
from app.files import access
from app.files.downloads import content_disposition
from app.files.routes import PRIVATE_CACHE
from app.http import load
from app.public.routes import PUBLIC_CACHE
from app.schemas import PlainString, public_record_rows, record_rows


class ArchiveQuerySchema(Schema):
    """`path`: the folder, a plain prefix of the records' paths as in the list filter."""

    class Meta:
        unknown = EXCLUDE

    path = PlainString(
        required=True,
        error_messages={"required": "The path field is required."},
        metadata={
            "description": (
                "Folder to pack: a plain string prefix of the records' paths, as in the list "
                "filter (`reports/2026` also matches `reports/2026-q1`)."
            )
        },
    )


archive_query_schema = ArchiveQuerySchema()


def _limits() -> services.ArchiveLimits:
    config = current_app.config
    return services.ArchiveLimits(config["ZIP_MAX_FILES"], config["ZIP_MAX_MB"] * 1024 * 1024)


def _archive_response(user, cache_control: str) -> Response:
    path = load(archive_query_schema, request.args.to_dict())["path"]
    today = access.today()
    records = services.downloadable_records(user, path, today, _limits())
    entries = services.entry_names(records)
    dump = public_record_rows if user is None else record_rows
    archive = services.folder_archive(
        entries, services.manifest(entries, dump), current_app.extensions["storage"]
    )
    length = len(archive)
    # Sent by the server's event loop like downloads: a long archive holds no request thread.
    body = streaming.event_loop_body(request.environ, iter(archive), length)
    response = Response(body, mimetype="application/zip", direct_passthrough=True)
    response.content_length = length
    response.headers["Content-Disposition"] = content_disposition(services.archive_file_name(path))
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cache-Control"] = cache_control
    return response


@bp.get("/api/files.zip")
def download_folder():
    return _archive_response(current_user(), PRIVATE_CACHE)


@bp.get("/api/public/files.zip")
def download_released_folder():
    return _archive_response(None, PUBLIC_CACHE)
