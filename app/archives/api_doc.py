"""The folder archive endpoints in the OpenAPI document (called by app/docs/openapi.py)."""

from __future__ import annotations

from typing import Any

from apispec import APISpec

from app.archives.routes import PRIVATE_CACHE, PUBLIC_CACHE, archive_query_schema
from app.archives.services import MANIFEST_NAME
from app.docs import openapi as doc


def _archive_ok(cache: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": (
            "A ZIP of stored (uncompressed) entries, ZIP64 where sizes need it, streamed: "
            "`<path>/<original_name>` of every file the caller may download right now (a "
            "repeated name becomes `name (2).ext`), and first of all "
            f'`{MANIFEST_NAME}`: `{{"files": [{{"entry", "sha256", ...record}}]}}`. '
            "A folder without such files gives an archive with only the manifest."
        ),
        "headers": {
            "Content-Length": doc.header(
                "The archive's exact size, known before it streams.",
                {"type": "integer", "minimum": 0},
            ),
            "Content-Disposition": doc.header(
                "`attachment`, named after the last segment of `path`.",
                {"type": "string", "pattern": '^attachment; filename="[^"]*\\.zip"'},
            ),
            "X-Content-Type-Options": doc.header(
                "Browsers must not sniff.", {"type": "string", "const": "nosniff"}
            ),
            "Cache-Control": cache,
        },
        "content": {"application/zip": {}},
    }


def _limits_text(max_files: int, max_mb: int) -> str:
    return (
        f"At most {max_files} files and {max_mb} MiB per archive on this instance "
        "(`ZIP_MAX_FILES`, `ZIP_MAX_MB`); a folder over either limit answers 422 on `path`."
    )


def add_archive_paths(spec: APISpec, max_files: int, max_mb: int) -> None:
    parameters = [{"in": "query", "schema": archive_query_schema}]
    spec.path(
        "/api/files.zip",
        operations={
            "get": {
                "tags": ["Files"],
                "operationId": "downloadFolder",
                "summary": "Download a folder as one ZIP",
                "description": (
                    "Your records under `path` (administrators: all) that you may download: "
                    "released and not under embargo, for administrators every one. "
                    + _limits_text(max_files, max_mb)
                ),
                "parameters": parameters,
                "responses": {
                    "200": _archive_ok(doc.private_cache(PRIVATE_CACHE)),
                    **doc.errors(
                        "Unauthenticated", "ValidationFailed", "ServerError", "ServiceUnavailable"
                    ),
                },
            }
        },
    )
    spec.path(
        "/api/public/files.zip",
        operations={
            "get": {
                "tags": ["Public"],
                "operationId": "downloadReleasedFolder",
                "summary": "Download a released folder as one ZIP",
                "description": (
                    "Released records under `path` that are not under embargo. "
                    + _limits_text(max_files, max_mb)
                ),
                "security": doc.NO_TOKEN,
                "parameters": parameters,
                "responses": {
                    "200": _archive_ok(doc.public_cache(PUBLIC_CACHE)),
                    **doc.errors(
                        "ValidationFailed",
                        "ServerError",
                        "ServiceUnavailable",
                        cache=doc.public_cache(PUBLIC_CACHE),
                    ),
                },
            }
        },
    )
