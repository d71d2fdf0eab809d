"""Swagger UI, served from the installed `flask-swagger-ui` package so that the documentation
page needs no internet access (and never loads anything from a CDN)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

# Swagger UI's distribution files as that package ships them (Apache-2.0, see LICENSE there).
SWAGGER_UI_DIST = Path(str(files("flask_swagger_ui") / "dist"))
SWAGGER_UI_VERSION = (SWAGGER_UI_DIST / "VERSION").read_text(encoding="utf-8").strip()

INITIALIZER = "docs.js"

# Everything the page may load, with its type (text types get `; charset=utf-8`); any other
# name is 404.
ASSET_TYPES = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
    "favicon-16x16.png": "image/png",
    "LICENSE": "text/plain",
    INITIALIZER: "text/javascript",
}

# Starts Swagger UI on the page's element; the document's address comes from the page, so this
# file is static and the page needs no inline script (the Content-Security-Policy forbids it).
INITIALIZER_JS = """\
"use strict";
window.addEventListener("DOMContentLoaded", function () {
  var root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.specUrl,
    domNode: root,
    presets: [SwaggerUIBundle.presets.apis],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl],
    layout: "BaseLayout",
    deepLinking: true,
    docExpansion: "list",
    defaultModelsExpandDepth: 0,
    displayOperationId: false,
    displayRequestDuration: true,
    // No validator badge: it would send the document to an outside service.
    validatorUrl: null
  });
});
"""
