"""A picture for every release (issue 50): covers derived from a record's content or
uploaded by its owner, made off the request path, shown only where the content may be
downloaded (docs/covers.md)."""

from __future__ import annotations

from flask import Flask


def init_app(app: Flask) -> None:
    from app.covers import making

    making.init_app(app)
