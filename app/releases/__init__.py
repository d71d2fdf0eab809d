"""Four-eyes release approval (issue 38, `RELEASE_APPROVAL`): requests, their decisions, the
mail about them and the report. The rule at a record's own writes is app/files/approval.py."""

from flask import Flask


def init_app(app: Flask) -> None:
    from app.releases import mail

    mail.init_app(app)
