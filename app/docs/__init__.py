"""The OpenAPI document and the interactive API documentation page."""

from flask import Blueprint

bp = Blueprint("docs", __name__)

from app.docs import routes  # noqa: E402,F401
