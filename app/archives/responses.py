"""A folder's ZIP as an answer, for the views that send one (routes.py: an account's and the
public's; app/links: a share link's) and its description in the API document."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Response, current_app, request
from marshmallow import EXCLUDE, Schema

from app import streaming
from app.archives import services
from app.auth.services import Caller
from app.docs.openapi import header
from app.files import access
from app.files.downloads import RECHECK_SECONDS, content_disposition, still_allowed
from app.files.relations import SeenLinks
from app.http import load
from app.schemas.fast_dump import public_record_rows, record_rows
from app.schemas.field_types import PlainString
from app.stats import deferred_counter


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


def archive_ok(cache: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": (
            "A ZIP of stored (uncompressed) entries, ZIP64 where sizes need it, streamed: "
            "`<path>/<original_name>` of every file the caller may download right now (a "
            "repeated name, or a file name that is also a folder's there, becomes "
            "`name (2).ext`), and first of all "
            f'`{services.MANIFEST_NAME}`: `{{"files": [{{"entry", "sha256", ...record}}]}}`. '
            "A folder without such files gives an archive with only the manifest. A record "
            "changed or deleted while the archive streams ends it early: the connection "
            "closes before `Content-Length` bytes; ask again."
        ),
        "headers": {
            "Content-Length": header(
                "The archive's exact size, known before it streams.",
                {"type": "integer", "minimum": 0},
            ),
            "Content-Disposition": header(
                "`attachment`, named after the last segment of `path`.",
                {"type": "string", "pattern": '^attachment; filename="[^"]*\\.zip"'},
            ),
            "X-Content-Type-Options": header(
                "Browsers must not sniff.", {"type": "string", "const": "nosniff"}
            ),
            "Cache-Control": cache,
        },
        "content": {"application/zip": {}},
    }


def _limits() -> services.ArchiveLimits:
    config = current_app.config
    return services.ArchiveLimits(config["ZIP_MAX_FILES"], config["ZIP_MAX_MB"] * 1024 * 1024)


def archive_response(
    user,
    cache_control: str,
    path: str | None = None,
    name: str | None = None,
    again: Callable[[], Any] | None = None,
) -> Response:
    """The ZIP of what `user` (None: the public; or a share link's holder) may download
    under `path` (None: the `path` query parameter), named after `name` or the path.
    `again`: the caller as it is now (raises once its token or link is gone), asked every
    few seconds while the archive streams, which ends short once it raises (its members
    are checked batch by batch anyway)."""
    if path is None:
        path = load(archive_query_schema, request.args.to_dict())["path"]
    today = access.today()
    members = services.pick(user, path, today, _limits())

    def scope():
        return services.scope(user, path, today)

    app = current_app._get_current_object()
    dump = record_rows if isinstance(user, Caller) else SeenLinks(public_record_rows, user)
    manifest = services.Manifest(app, members, scope, dump)
    manifest.measure()
    if manifest.size >= streaming.SMALL_BODY_BYTES:
        # Measuring read every record once: the pages that left empty go back before the
        # archive streams for as long as its reader takes (bench.open_internet: 0.27 MiB of
        # the memory per slow reader of a 1,000-record archive).
        streaming.trim_freed_memory()
    if user is None:
        door, user_id = "public", None
    elif isinstance(user, access.LinkHolder):
        door, user_id = "link", None  # a holder is a visitor like the public, counted apart
    else:
        door, user_id = "account", user.id
    # Each member counts once its bytes were handed on, not when the headers go out: a
    # reader who closes the archive early counts only what it received (issue 36, 9).
    archive = services.FolderArchive(
        app,
        manifest,
        scope,
        current_app.extensions["storage"],
        on_member=deferred_counter(door, user_id),
    )
    length = len(archive)
    # Sent by the server's event loop like downloads: a long archive holds no request thread.
    # Read ahead by one chunk only: a slow reader holds one chunk, not the downloads' buffer.
    chunks: Any = iter(archive)
    if again is not None:
        chunks = streaming.Rechecked(chunks, still_allowed(again), RECHECK_SECONDS)
    body = streaming.event_loop_body(
        request.environ, chunks, length, buffer_bytes=services.CHUNK_BYTES
    )
    response = Response(body, mimetype="application/zip", direct_passthrough=True)
    response.content_length = length
    response.headers["Content-Disposition"] = content_disposition(
        services.archive_file_name(name or path)
    )
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cache-Control"] = cache_control
    return response
