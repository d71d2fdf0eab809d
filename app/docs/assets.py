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

# Starts Swagger UI on the page's element; the document's address comes from the page, so the
# page needs no inline script (the Content-Security-Policy forbids it).
INITIALIZER_JS = (Path(__file__).parent / "static" / INITIALIZER).read_text(encoding="utf-8")
