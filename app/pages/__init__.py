"""Landing pages: server-rendered HTML for people, Google Scholar and link previews.

What a page shows is computed in `records.py` from what the public API would answer (the
visibility rules of app/files/access.py); the templates only loop and branch.
"""


def init_app() -> None:
    """Wire the pages' listeners: a record's citation is stored when it is written."""
    from app.pages import stored

    stored.init_app()
