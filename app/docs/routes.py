"""`/api/openapi.json`, the Swagger UI page at `/api/docs` and the page's assets; no token."""

from __future__ import annotations

import hashlib
from functools import cache

from flask import Flask, Response, current_app, render_template, request, url_for
from werkzeug.exceptions import NotFound

from app.docs.assets import (
    ASSET_TYPES,
    INITIALIZER,
    INITIALIZER_JS,
    SWAGGER_UI_DIST,
    SWAGGER_UI_VERSION,
)
from app.docs.openapi import NO_TOKEN, REVALIDATION_ETAG, Blueprint, openapi_document, ref

bp = Blueprint(
    "docs", __name__, tag="Documentation", security=NO_TOKEN, template_folder="templates"
)


ASSET_MAX_AGE = 24 * 60 * 60
INITIALIZER_VERSION = hashlib.sha256(INITIALIZER_JS.encode()).hexdigest()[:12]
NOT_MODIFIED = "The cached copy is current."
ETAGGED = {"ETag": REVALIDATION_ETAG}
NAMES = {"type": "string", "enum": sorted(ASSET_TYPES)}
ASSET_NAME = {"name": "name", "in": "path", "required": True, "schema": NAMES}

# Scripts and style sheets from this service only; the document is fetched from it too.
# Swagger UI sets inline styles and uses data: images in its style sheet.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)


def _document_json(app: Flask) -> bytes:
    """The serialised document, made once per application."""
    cached = app.extensions.get("openapi_json")
    if cached is None:
        cached = app.json.dumps(openapi_document(app)).encode()
        app.extensions["openapi_json"] = cached
    return cached


@bp.get("/api/openapi.json")
@bp.doc(operationId="getOpenApiDocument")
@bp.alt_response(
    200, schema={"type": "object"}, description="The document (OpenAPI 3.1).", headers=ETAGGED
)
@bp.alt_response(304, description=NOT_MODIFIED)
def openapi_json() -> Response:
    """This OpenAPI document"""
    response = Response(_document_json(current_app), mimetype="application/json")
    response.cache_control.no_cache = True
    response.add_etag()
    return response.make_conditional(request)


def _asset_url(name: str) -> str:
    version = INITIALIZER_VERSION if name == INITIALIZER else SWAGGER_UI_VERSION
    return url_for("docs.docs_asset", name=name, v=version)


@bp.get("/api/docs")
@bp.doc(operationId="getDocsPage")
@bp.alt_response(200, schema={"type": "string"}, content_type="text/html", description="The page.")
def docs_page() -> Response:
    """Interactive documentation (Swagger UI)

    Works offline: every asset is served by the service itself.
    """
    html = render_template(
        "docs/page.html",
        css=_asset_url("swagger-ui.css"),
        icon32=_asset_url("favicon-32x32.png"),
        icon16=_asset_url("favicon-16x16.png"),
        spec=url_for("docs.openapi_json"),
        bundle=_asset_url("swagger-ui-bundle.js"),
        initializer=_asset_url(INITIALIZER),
    )
    response = Response(html, mimetype="text/html")
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.cache_control.no_cache = True
    return response


@cache
def _asset_bytes(name: str) -> bytes:
    """The page's few assets (about 1.5 MB in all), read once and kept."""
    if name == INITIALIZER:
        return INITIALIZER_JS.encode()
    return (SWAGGER_UI_DIST / name).read_bytes()


@bp.get("/api/docs/assets/<name>", parameters=[ASSET_NAME])
@bp.doc(
    operationId="getDocsAsset",
    responses={
        "200": {
            "description": "The asset; cacheable for a day and revalidated by ETag.",
            "headers": ETAGGED,
            "content": {mimetype: {} for mimetype in sorted(set(ASSET_TYPES.values()))},
        }
    },
)
@bp.alt_response(304, description=NOT_MODIFIED)
@bp.alt_response(404, schema=ref("Error"), description="No such asset.")
def docs_asset(name: str) -> Response:
    """A script, style sheet or icon of the documentation page"""
    mimetype = ASSET_TYPES.get(name)
    if mimetype is None:
        raise NotFound()
    response = Response(_asset_bytes(name), mimetype=mimetype)
    response.add_etag()
    response = response.make_conditional(request)
    response.cache_control.public = True
    response.cache_control.max_age = ASSET_MAX_AGE
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response
