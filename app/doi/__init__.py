"""DOIs through DataCite (issue 40, `DATACITE_*`): reserved for a record, registered, updated
and hidden as the record goes, through an outbox that no request waits on.

`lookup` is what readers of records (pages, exports, OAI-PMH, API answers) use; the rest of
the package reserves DOIs and keeps DataCite in step.
"""

from flask import Flask


def init_app(app: Flask) -> None:
    from app.doi import worker

    worker.init_app(app)
