from __future__ import annotations

from app.archives.responses import archive_ok, archive_query_schema, archive_response
from app.auth.guard import current_user, current_user_again
from app.docs.openapi import CACHED, NO_TOKEN, SERVER, Blueprint, in_query, private_cache
from app.http import PRIVATE_CACHE, PUBLIC_CACHE

# Not in autocommit like the other reads: the records are read through a server-side cursor,
# which PostgreSQL only keeps inside a transaction.
bp = Blueprint("archives", __name__, tag="Files")

PARAMETERS = in_query(archive_query_schema)


@bp.get("/api/files.zip")
@bp.doc(
    operationId="downloadFolder",
    parameters=PARAMETERS,
    responses={"200": archive_ok(private_cache(PRIVATE_CACHE))},
)
@bp.errors("Unauthenticated", "ValidationFailed", *SERVER)
def download_folder():
    """Download a folder as one ZIP

    Your records under `path` (administrators: all) that you may download: released and not
    under embargo, for administrators every one. At most {zip_max_files} files and {zip_max_mb}
    MiB per archive on this instance (`ZIP_MAX_FILES`, `ZIP_MAX_MB`); a folder over either
    limit answers 422 on `path`.
    """
    return archive_response(current_user(), PRIVATE_CACHE, again=current_user_again())


@bp.get("/api/public/files.zip", tags=["Public"])
@bp.doc(
    operationId="downloadReleasedFolder",
    security=NO_TOKEN,
    parameters=PARAMETERS,
    responses={"200": archive_ok(CACHED["Cache-Control"])},
)
@bp.errors("ValidationFailed", *SERVER, headers=CACHED)
def download_released_folder():
    """Download a released folder as one ZIP

    Released records under `path` that are not under embargo. At most {zip_max_files} files and
    {zip_max_mb} MiB per archive on this instance (`ZIP_MAX_FILES`, `ZIP_MAX_MB`); a folder over
    either limit answers 422 on `path`.
    """
    return archive_response(None, PUBLIC_CACHE)
