"""`flask users remove` leaves no id of the removed account in the release requests (issue 38
review): SQLite reuses ids, and a later account must not pass for the removed submitter or
editor."""

from __future__ import annotations

import uuid

from flask import Flask
from sqlalchemy import or_, select

from app.extensions import db
from app.models import ReleaseEditor, ReleaseRequest
from tests.releases.conftest import Releases, grant_approver
from tests.releases.test_requests import pending_upload
from tests.support.api import Account, Api


def test_a_removed_account_leaves_no_id_in_release_requests(
    app: Flask, api: Api, alice: Account, releases: Releases
):
    dave = api.account("dave@example.org")
    record, first = pending_upload(api, dave)
    # Dave's edit cancels his request (he decided it) and makes him an editor.
    assert api.patch(record["id"], dave, {"titel": "Neu"}).status_code == 200
    assert releases.state(first) == "cancelled"
    second = releases.submit(record["id"], dave).get_json()["id"]

    removed = app.test_cli_runner().invoke(
        args=["users", "remove", dave.email, "--hand-files-to", alice.email]
    )
    assert removed.exit_code == 0, removed.output
    with app.app_context():
        left = db.session.scalars(
            select(ReleaseRequest).where(
                or_(
                    ReleaseRequest.submitted_by == dave.id,
                    ReleaseRequest.decided_by == dave.id,
                )
            )
        ).all()
        editors = db.session.scalars(
            select(ReleaseEditor).where(ReleaseEditor.user_id == dave.id)
        ).all()
        assert (left, editors) == ([], [])
        assert db.session.get(ReleaseRequest, uuid.UUID(second)).state == "pending"
        db.session.remove()

    # The next account (on SQLite it may get dave's id) is nobody but itself.
    erin = api.account("erin@example.org")
    grant_approver(app, erin)
    shown = api.get(f"/api/release-requests/{second}", erin).get_json()
    assert shown["submitted_by"] is None
    assert releases.approve(second, erin).status_code == 200
    assert api.row(record["id"]).freigabe is True
