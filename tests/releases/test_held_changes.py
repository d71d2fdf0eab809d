"""A released record's new content or public fields wait for approval beside it (issue 38,
requirement 4, with RELEASE_APPROVAL=on): the public keeps the approved bytes and fields until
a second person approves exactly the pending ones, and pending bytes never outlive their
request."""

from __future__ import annotations

import hashlib
import uuid
from datetime import date, timedelta
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from app.extensions import db
from app.models import DRAFT_NUMBER, FileVersion, PendingObjectDeletion, ReleaseRequest
from tests.files.test_failures import FailingCommit, wrap_writers
from tests.releases.conftest import Releases
from tests.releases.test_requests import audit_actions, pending_upload
from tests.support import samples
from tests.support.api import Account, Api

V1 = samples.pdf_bytes()
V2 = samples.pdf_bytes() + b"\n% Fassung 2\n"
V3 = samples.pdf_bytes() + b"\n% Fassung 3\n"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


FUTURE = (date.today() + timedelta(days=400)).isoformat()


def released(api: Api, owner: Account, approver: Account, releases: Releases, **meta) -> dict:
    record, request_id = pending_upload(api, owner, **meta)
    assert releases.approve(request_id, approver).status_code == 200
    return record


def public_view(api: Api, record_id: str) -> tuple[Any, bytes]:
    """What an anonymous reader gets: the public record and its bytes."""
    answer = api.get(f"/api/public/files/{record_id}")
    assert answer.status_code == 200
    download = api.get(f"/api/public/files/{record_id}/download")
    assert download.status_code == 200
    return answer.get_json(), download.data


def request_rows(app: Flask, record_id: str) -> list[tuple[str, str, str | None]]:
    """The record's requests, oldest first: kind, state, and the key of the new bytes the
    pending one waits with (its draft's own, if any)."""
    with app.app_context():
        rows = db.session.scalars(
            select(ReleaseRequest)
            .where(ReleaseRequest.record_id == uuid.UUID(record_id))
            .order_by(ReleaseRequest.submitted_at)
        ).all()
        draft = db.session.get(FileVersion, (uuid.UUID(record_id), DRAFT_NUMBER))
        waiting = None if draft is None else draft.stored_path
        found = [(r.kind, r.state, waiting if r.state == "pending" else None) for r in rows]
        db.session.remove()
        return found


def owed_keys(app: Flask) -> list[str]:
    with app.app_context():
        keys = list(db.session.scalars(select(PendingObjectDeletion.key)))
        db.session.remove()
        return keys


def test_a_replacement_waits_and_the_public_keeps_the_approved_bytes_until_approval(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    before = public_view(api, record["id"])
    etag = api.get(f"/api/files/{record['id']}", alice).headers["ETag"]
    approved_key = api.row(record["id"]).stored_path

    replaced = api.replace(alice, record["id"], "v2.pdf", V2, change_note="Tabelle 3 korrigiert")
    assert replaced.status_code == 200, replaced.get_json()
    body = replaced.get_json()
    assert (body["version"], body["original_name"], body["freigabe"]) == (1, "report.pdf", True)
    asked = body["release_request"]
    assert (asked["kind"], asked["state"]) == ("change", "pending")
    assert asked["pending"]["fields"] == {}
    assert asked["pending"]["content"]["sha256"] == sha256(V2)
    assert asked["pending"]["content"]["change_note"] == "Tabelle 3 korrigiert"
    # The public, the owner's record and its ETag: all as approved.
    assert public_view(api, record["id"]) == before
    assert replaced.headers["ETag"] == etag
    assert api.get(f"/api/files/{record['id']}/download", alice).data == V1
    assert api.row(record["id"]).stored_path == approved_key
    pending_key = request_rows(app, record["id"])[-1][2]
    assert pending_key is not None and pending_key != approved_key
    assert api.objects() == {approved_key, pending_key}

    # The approver reviews exactly the pending bytes; the owner may not approve them.
    review = api.get(f"/api/release-requests/{asked['id']}/content", carol)
    assert (review.status_code, review.data) == (200, V2)
    assert review.headers["ETag"] == f'"{sha256(V2)}"'
    assert releases.approve(asked["id"], alice).status_code == 403
    approved = releases.approve(asked["id"], carol)
    assert approved.status_code == 200, approved.get_json()

    public, data = public_view(api, record["id"])
    assert (data, public["version"]) == (V2, 2)
    row = api.row(record["id"])
    assert (row.stored_path, row.version, row.freigabe) == (pending_key, 2, True)
    assert api.get(f"/api/files/{record['id']}", alice).headers["ETag"] != etag
    [ended] = api.get(f"/api/files/{record['id']}/versions", alice).get_json()["data"]
    assert (ended["number"], ended["change_note"], ended["kept"]) == (
        1,
        "Tabelle 3 korrigiert",
        False,
    )
    assert api.objects() == {pending_key} and owed_keys(app) == []
    actions = [(action, actor) for action, actor, _ in audit_actions(app, record["id"])]
    assert ("release.submit", alice.email) in actions
    assert ("file.replace", carol.email) in actions
    assert actions[-2:] in (
        [("file.replace", carol.email), ("release.approve", carol.email)],
        [("release.approve", carol.email), ("file.replace", carol.email)],
    )


def test_a_public_field_waits_and_a_field_the_public_does_not_see_changes_at_once(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    changed = api.patch(record["id"], alice, {"titel": "Bericht (korrigiert)"})
    assert changed.status_code == 200
    body = changed.get_json()
    assert body["titel"] == "Bericht"
    asked = body["release_request"]
    assert asked["kind"] == "change"
    assert asked["pending"] == {"fields": {"titel": "Bericht (korrigiert)"}, "content": None}
    assert api.get(f"/api/public/files/{record['id']}").get_json()["titel"] == "Bericht"
    # The approver sees the field diff: the record as it is and what the approval sets.
    shown = api.get(f"/api/release-requests/{asked['id']}", carol).get_json()
    assert (shown["record"]["titel"], shown["pending"]["fields"]["titel"]) == (
        "Bericht",
        "Bericht (korrigiert)",
    )
    # The same save again keeps the request; a field the public does not see needs nobody.
    again = api.patch(record["id"], alice, {"titel": "Bericht (korrigiert)"})
    assert again.get_json()["release_request"]["id"] == asked["id"]
    direct = api.patch(record["id"], alice, {"erstellt_von": "Referat 3"})
    assert direct.status_code == 200
    assert direct.get_json()["release_request"]["id"] == asked["id"]
    assert api.row(record["id"]).erstellt_von == "Referat 3"
    assert releases.approve(asked["id"], carol).status_code == 200
    assert api.get(f"/api/public/files/{record['id']}").get_json()["titel"] == (
        "Bericht (korrigiert)"
    )
    assert api.row(record["id"]).version == 1


def test_a_further_change_supersedes_and_declining_leaves_no_pending_bytes(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    approved_key = api.row(record["id"]).stored_path
    first = api.replace(alice, record["id"], "v2.pdf", V2).get_json()["release_request"]
    [(_, _, v2_key)] = [r for r in request_rows(app, record["id"]) if r[1] == "pending"]
    # A title edit joins the waiting bytes in a new request; the bytes stay.
    second = api.patch(record["id"], alice, {"titel": "Neu"}).get_json()["release_request"]
    assert second["id"] != first["id"] and releases.state(first["id"]) == "cancelled"
    assert second["pending"]["content"]["sha256"] == sha256(V2)
    assert second["pending"]["fields"] == {"titel": "Neu"}
    assert api.objects() == {approved_key, v2_key}
    # The same bytes again change nothing; new bytes replace the waiting ones, which go.
    same = api.replace(alice, record["id"], "v2.pdf", V2).get_json()["release_request"]
    assert same["id"] == second["id"] and api.objects() == {approved_key, v2_key}
    third = api.replace(alice, record["id"], "v3.pdf", V3).get_json()["release_request"]
    assert releases.state(second["id"]) == "cancelled"
    assert third["pending"]["fields"] == {"titel": "Neu"}
    [(_, _, v3_key)] = [r for r in request_rows(app, record["id"]) if r[1] == "pending"]
    assert api.objects() == {approved_key, v3_key}
    # The old request's bytes are no longer what approvers may review.
    assert api.get(f"/api/release-requests/{first['id']}/content", carol).status_code == 409
    declined = releases.act(third["id"], "decline", carol, reason="Noch nicht")
    assert declined.status_code == 200
    assert api.objects() == {approved_key} and owed_keys(app) == []
    assert public_view(api, record["id"])[1] == V1
    row = api.row(record["id"])
    assert (row.titel, row.version) == ("Bericht", 1)


@pytest.mark.parametrize("how", ["cancel", "unrelease", "delete", "back"])
def test_pending_bytes_go_with_their_request(
    app: Flask,
    api: Api,
    alice: Account,
    carol: Account,
    releases: Releases,
    how: str,
):
    record = released(api, alice, carol, releases)
    approved_key = api.row(record["id"]).stored_path
    asked = api.replace(alice, record["id"], "v2.pdf", V2).get_json()["release_request"]
    assert len(api.objects()) == 2
    if how == "cancel":
        assert releases.act(asked["id"], "cancel", alice).status_code == 200
    elif how == "unrelease":
        assert api.patch(record["id"], alice, {"freigabe": False}).status_code == 200
        assert api.row(record["id"]).checksum_sha256 == sha256(V1)
    elif how == "back":
        # The approved bytes again: nothing waits any more.
        back = api.replace(alice, record["id"], "bericht.pdf", V1)
        assert back.get_json()["release_request"] is None
    else:
        assert api.delete(record["id"], alice).status_code == 204
        approved_key = None
    assert releases.state(asked["id"]) == "cancelled"
    assert api.objects() == ({approved_key} if approved_key else set())
    assert owed_keys(app) == []
    assert releases.approve(asked["id"], carol).status_code == 409


def test_an_earlier_sperrfrist_and_a_title_wait_together(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases, sperrfrist=FUTURE)
    asked = api.patch(record["id"], alice, {"sperrfrist": None}).get_json()["release_request"]
    assert asked["kind"] == "sperrfrist"
    both = api.patch(record["id"], alice, {"titel": "Neu"}).get_json()["release_request"]
    assert both["kind"] == "change"
    assert both["pending"]["fields"] == {"sperrfrist": None, "titel": "Neu"}
    assert api.get(f"/api/public/files/{record['id']}/download").status_code == 403
    assert releases.approve(both["id"], carol).status_code == 200
    public, data = public_view(api, record["id"])
    assert (public["titel"], public["sperrfrist"], data) == ("Neu", None, V1)


def test_a_failed_commit_or_store_while_holding_leaves_no_row_and_no_object(
    api: Api, alice: Account, carol: Account, releases: Releases, monkeypatch: pytest.MonkeyPatch
):
    record = released(api, alice, carol, releases)
    objects = api.objects()
    real_commit = db.session.commit

    def commit() -> None:
        if any(isinstance(obj, ReleaseRequest) for obj in db.session.new):
            raise OperationalError("COMMIT", {}, Exception("server closed the connection"))
        real_commit()

    monkeypatch.setattr(db.session, "commit", commit)
    assert api.replace(alice, record["id"], "v2.pdf", V2).status_code == 503
    monkeypatch.setattr(db.session, "commit", real_commit)
    wrap_writers(api, monkeypatch, lambda n, inner: FailingCommit(inner, 10**9))
    assert api.replace(alice, record["id"], "v2.pdf", V2).status_code == 503
    assert api.objects() == objects
    assert [r[1] for r in request_rows(api.app, record["id"])] == ["approved"]
    assert public_view(api, record["id"])[1] == V1


def test_reconcile_neither_reports_nor_removes_pending_bytes(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    api.replace(alice, record["id"], "v2.pdf", V2)
    objects = api.objects()
    assert len(objects) == 2
    runner = app.test_cli_runner()
    result = runner.invoke(args=["storage", "reconcile", "--fix", "--grace-minutes", "0"])
    assert result.exit_code == 0, result.output
    assert "orphaned objects: 0 (removed 0)" in result.output
    assert api.objects() == objects
    [pending] = releases.listed(carol, state="pending").get_json()["data"]
    assert api.get(f"/api/release-requests/{pending['id']}/content", carol).data == V2


def test_kept_versions_keep_the_approved_bytes_a_swap_ends(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases
):
    app.config["KEEP_RELEASED_VERSIONS"] = "on"
    record = released(api, alice, carol, releases)
    asked = api.replace(alice, record["id"], "v2.pdf", V2).get_json()["release_request"]
    assert releases.approve(asked["id"], carol).status_code == 200
    kept = api.get(f"/api/public/files/{record['id']}/versions/1/download")
    assert (kept.status_code, kept.data) == (200, V1)
    with app.app_context():
        [version] = db.session.scalars(select(FileVersion)).all()
        assert version.replaced_by == alice.id
        db.session.remove()


def test_the_submitter_hears_when_someone_elses_change_cancels_the_request(
    api: Api, alice: Account, carol: Account, admin: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    asked = api.replace(alice, record["id"], "v2.pdf", V2).get_json()["release_request"]
    assert (carol.email, "Release request: Bericht") in releases.outbox()
    mails = len(releases.outbox())
    # Her own further change supersedes her request without a mail to herself ...
    mine = api.patch(record["id"], alice, {"titel": "Neu"}).get_json()["release_request"]
    assert releases.state(asked["id"]) == "cancelled"
    assert alice.email not in [to for to, _ in releases.outbox()[mails:]]
    # ... an administrator's change of the record tells her.
    assert api.patch(record["id"], admin, {"freigabe": False}).status_code == 200
    assert releases.state(mine["id"]) == "cancelled"
    assert releases.outbox()[-1] == (alice.email, "Release request cancelled: Bericht")


def test_with_the_setting_switched_off_pending_requests_wait_unapproved(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    other = released(api, alice, carol, releases)
    asked = api.replace(alice, record["id"], "v2.pdf", V2).get_json()["release_request"]
    api.replace(alice, other["id"], "v3.pdf", V3)
    app.config["RELEASE_APPROVAL"] = "off"
    refused = releases.approve(asked["id"], carol)
    assert refused.status_code == 409 and "RELEASE_APPROVAL is off" in refused.get_json()["message"]
    assert releases.state(asked["id"]) == "pending"
    assert public_view(api, record["id"])[1] == V1
    # Still declined (its bytes go), and a deleted record's waiting bytes go with it.
    assert releases.act(asked["id"], "decline", carol, reason="aus").status_code == 200
    assert api.delete(other["id"], alice).status_code == 204
    assert api.objects() == {api.row(record["id"]).stored_path}
    assert owed_keys(app) == []
