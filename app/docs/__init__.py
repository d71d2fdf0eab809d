"""The OpenAPI document and the interactive API documentation page."""

from flask import Blueprint

bp = Blueprint("docs", __name__)
