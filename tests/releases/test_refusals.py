"""The release-approval rule's refusals word for word, and what a deletion forgets, where the
API tests of test_requests.py look only at a status or a word."""

from __future__ import annotations

import uuid

from flask import Flask
from sqlalchemy import delete, func, select

from app.extensions import db
from app.models import FileRecord, ReleaseEditor
from tests.releases.conftest import Releases
from tests.releases.test_requests import FUTURE, pending_upload
from tests.support import samples
from tests.support.api import Account, Api


def test_the_content_under_review_is_refused_with_its_reason(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice)
    path = f"/api/release-requests/{request_id}/content"
    refused = api.get(path, alice)
    assert refused.status_code == 403
    assert refused.get_json()["message"] == "Only approvers review the content of release requests."
    # Content that no longer matches the request (changed without passing the rule, e.g. by
    # hand in the database): the approver gets no content at all.
    api.set_columns(record["id"], checksum_sha256="0" * 64)
    changed = api.get(path, carol)
    assert changed.status_code == 409
    assert changed.get_json()["message"] == (
        "The record's content changed since the request was submitted."
    )


def test_deleting_a_record_cancels_its_request_by_whom_and_why_and_forgets_only_its_editors(
    app: Flask, api: Api, alice: Account, admin: Account, releases: Releases
):
    deleted, deleted_request = pending_upload(api, alice)
    kept, _ = pending_upload(api, alice)
    # The administrator edits both records (the edits cancel their requests).
    for record in (deleted, kept):
        assert api.patch(record["id"], admin, {"beschreibung": "korrigiert"}).status_code == 200
    assert releases.submit(deleted["id"], alice).status_code == 201
    again = releases.submit(kept["id"], alice)
    assert again.status_code == 201
    listed = api.get(f"/api/release-requests/{deleted_request}", alice).get_json()
    assert listed["state"] == "cancelled"

    pending = releases.listed(alice, state="pending").get_json()["data"]
    [deleted_again] = [r["id"] for r in pending if r["record_id"] == deleted["id"]]
    assert api.delete(deleted["id"], alice).status_code == 204
    answer = api.get(f"/api/release-requests/{deleted_again}", alice).get_json()
    assert (answer["state"], answer["decided_by"], answer["reason"]) == (
        "cancelled",
        alice.email,
        "record deleted",
    )
    assert _editor_rows(app, deleted["id"]) == 0
    assert _editor_rows(app, kept["id"]) == 1
    # The other record's editor is still its editor: the four-eyes rule still refuses him.
    refused = releases.approve(again.get_json()["id"], admin)
    assert refused.status_code == 403
    assert "changed this record" in refused.get_json()["message"]


def test_an_embargo_added_to_a_released_record_needs_no_approval(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice)
    assert releases.approve(request_id, carol).status_code == 200
    response = api.patch(record["id"], alice, {"sperrfrist": FUTURE})
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["sperrfrist"] == FUTURE
    assert api.row(record["id"]).sperrfrist.isoformat() == FUTURE
    assert releases.listed(carol, state="pending").get_json()["data"] == []


def _editor_rows(app: Flask, record_id: str) -> int:
    with app.app_context():
        statement = select(func.count()).where(ReleaseEditor.record_id == uuid.UUID(record_id))
        count = db.session.execute(statement).scalar_one()
        db.session.remove()
        return count


OVERRIDE = " As an administrator you may override this only with a reason (override_reason)."


def test_who_may_not_approve_is_told_why_word_for_word(
    api: Api, alice: Account, bob: Account, admin: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice)
    not_approver = releases.approve(request_id, bob)
    assert (not_approver.status_code, not_approver.get_json()["message"]) == (
        403,
        "Only approvers may approve release requests (an operator grants the role with "
        "`flask users grant-approver`).",
    )
    assert api.patch(record["id"], admin, {"beschreibung": "korrigiert"}).status_code == 200
    edited = releases.approve(releases.submit(record["id"], alice).get_json()["id"], admin)
    assert (edited.status_code, edited.get_json()["message"]) == (
        403,
        "You changed this record's content or public fields since its last approval: "
        "another approver must approve it." + OVERRIDE,
    )
    other, other_request = pending_upload(api, alice)
    assert releases.act(other_request, "cancel", alice).status_code == 200
    submitted = releases.submit(other["id"], admin)
    assert submitted.status_code == 201, submitted.get_json()
    own = releases.approve(submitted.get_json()["id"], admin)
    assert (own.status_code, own.get_json()["message"]) == (
        403,
        "You submitted this request: another approver must approve it." + OVERRIDE,
    )


def test_an_approval_of_changed_content_is_refused_and_cancels_the_request(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice)
    api.set_columns(record["id"], checksum_sha256="0" * 64)
    refused = releases.approve(request_id, carol)
    assert (refused.status_code, refused.get_json()["message"]) == (
        409,
        "The record's content or public fields changed since the request was submitted; "
        "the request is cancelled and must be submitted again.",
    )
    answer = api.get(f"/api/release-requests/{request_id}", alice).get_json()
    assert (answer["state"], answer["decided_by"], answer["reason"]) == (
        "cancelled",
        carol.email,
        "changed since submission",
    )
    assert api.row(record["id"]).freigabe is False


def test_a_request_whose_record_row_is_gone_is_cancelled_by_the_approval(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases
):
    """A record removed without the app (by hand in the database, or by a version before
    deletions cancelled requests): its request waits on nothing, and the approval says so."""
    record, request_id = pending_upload(api, alice)
    with app.app_context():
        db.session.execute(delete(FileRecord).where(FileRecord.id == uuid.UUID(record["id"])))
        db.session.commit()
        db.session.remove()
    refused = releases.approve(request_id, carol)
    assert (refused.status_code, refused.get_json()["message"]) == (
        409,
        "The record is gone; the request is cancelled.",
    )
    answer = api.get(f"/api/release-requests/{request_id}", carol).get_json()
    assert (answer["state"], answer["decided_by"], answer["reason"], answer["record"]) == (
        "cancelled",
        carol.email,
        "record deleted",
        None,
    )
    assert releases.listed(carol, state="pending").get_json()["data"] == []


def test_a_replacement_of_an_unreleased_record_cancels_its_request_by_whom_and_why(
    api: Api, alice: Account, admin: Account, carol: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice)
    replaced = api.replace(admin, record["id"], "v2.pdf", samples.pdf_bytes() + b"%v2")
    assert replaced.status_code == 200
    shown = api.get(f"/api/release-requests/{request_id}", alice).get_json()
    assert (shown["state"], shown["decided_by"], shown["reason"]) == (
        "cancelled",
        admin.email,
        "changed",
    )
    [ended] = api.get(f"/api/files/{record['id']}/versions", admin).get_json()["data"]
    assert ended["replaced_by"] == admin.id
    # The administrator replaced the content: not his to approve.
    again = releases.submit(record["id"], alice)
    refused = releases.approve(again.get_json()["id"], admin)
    assert refused.status_code == 403 and "changed this record" in refused.get_json()["message"]
    assert releases.approve(again.get_json()["id"], carol).status_code == 200


def test_identical_bytes_of_an_unreleased_record_leave_nothing_behind(
    api: Api, alice: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice)
    before = api.objects()
    same = api.replace(alice, record["id"], "again.pdf", samples.pdf_bytes())
    assert same.status_code == 200 and same.get_json()["version"] == 1
    assert api.objects() == before
    assert releases.state(request_id) == "pending"
