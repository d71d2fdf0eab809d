"""OAI-PMH 2.0 for released records (issue 13): the protocol at /oai (routes.py), the lists
it answers from (harvest.py), its XML (xml.py) and the tombstones of persistent deletions
(tombstones.py)."""

from app.oai.tombstones import init_app

__all__ = ["init_app"]
