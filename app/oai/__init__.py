"""OAI-PMH 2.0 for released records (issue 13): the protocol at /oai (routes.py), the lists
it answers from (harvest.py), its XML (xml.py) and the tombstones of persistent deletions
(tombstones.py)."""

from __future__ import annotations

from flask import Blueprint

from app.database import read_without_transaction
from app.oai.tombstones import init_app

bp = Blueprint("oai", __name__)
bp.before_request(read_without_transaction)

from app.oai import routes  # noqa: E402,F401

__all__ = ["bp", "init_app"]
