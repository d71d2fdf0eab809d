"""Full-text search over the records' descriptive fields (issue 13): the query language
(query.py), where the index lives on each database (index.py), the list parameters
(schemas.py) and `flask search reindex` (cli.py)."""

from __future__ import annotations

from app.search.index import init_app

__all__ = ["init_app"]
