"""Four-eyes release approval over the API (issue 38), with RELEASE_APPROVAL=on: a record is
released only by an approval of exactly what was submitted, by someone who neither owns,
submitted nor edited it."""

from __future__ import annotations

import base64
import csv
import io
import json
import uuid
from datetime import date, timedelta

from flask import Flask
from sqlalchemy import select

from app.extensions import db
from app.models import AuditEntry, ReleaseRequest
from tests.releases.conftest import Releases, grant_approver
from tests.support import samples
from tests.support.api import Account, Api

FUTURE = (date.today() + timedelta(days=400)).isoformat()
LATER = (date.today() + timedelta(days=800)).isoformat()


def audit_actions(app: Flask, record_id: str) -> list[tuple[str, str, dict]]:
    with app.app_context():
        rows = db.session.scalars(
            select(AuditEntry)
            .where(AuditEntry.record_id == uuid.UUID(record_id))
            .order_by(AuditEntry.seq)
        ).all()
        found = [(row.action, row.actor, json.loads(row.changes)) for row in rows]
        db.session.remove()
        return found


def pending_upload(api: Api, owner: Account, **metadata) -> tuple[dict, str]:
    response = api.upload(owner, titel="Bericht", **metadata)
    assert response.status_code == 201, response.get_json()
    body = response.get_json()
    [record] = body["files"]
    [opened] = body["release_requests"]
    assert opened["record_id"] == record["id"] and opened["state"] == "pending"
    return record, opened["id"]


def test_an_upload_asking_for_release_is_stored_unreleased_with_a_request(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice, freigabe="true")
    assert record["freigabe"] is False
    assert api.row(record["id"]).freigabe is False
    assert api.get(f"/api/public/files/{record['id']}").status_code == 404
    queue = releases.listed(carol, state="pending").get_json()["data"]
    assert [(r["id"], r["kind"], r["submitted_by"]) for r in queue] == [
        (request_id, "release", alice.email)
    ]
    assert queue[0]["content_sha256"] == api.row(record["id"]).checksum_sha256
    assert queue[0]["record"]["titel"] == "Bericht"


def test_an_approval_releases_the_record_with_the_approvers_name(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice)
    response = releases.approve(request_id, carol)
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["state"] == "approved"
    assert response.get_json()["decided_by"] == carol.email
    row = api.row(record["id"])
    assert row.freigabe is True
    assert row.freigegeben_von == releases.name_of(carol)
    public = api.get(f"/api/public/files/{record['id']}/download")
    assert public.status_code == 200
    assert public.data == samples.pdf_bytes()
    actions = [action for action, _, _ in audit_actions(app, record["id"])]
    # The approval's two entries are written by one transaction, in no particular order.
    assert actions[:2] == ["file.create", "release.submit"]
    assert sorted(actions[2:]) == ["file.update", "release.approve"]
    assert releases.approve(request_id, carol).status_code == 409


def test_approved_now_public_on_the_day_of_the_sperrfrist(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice, sperrfrist=FUTURE)
    assert releases.approve(request_id, carol).status_code == 200
    assert api.row(record["id"]).freigabe is True
    assert api.get(f"/api/public/files/{record['id']}").status_code == 200
    assert api.get(f"/api/public/files/{record['id']}/download").status_code == 403


def test_nobody_approves_their_own_record_submission_or_edit(
    app: Flask, api: Api, alice: Account, bob: Account, admin: Account, releases: Releases
):
    grant_approver(app, alice)
    grant_approver(app, bob)
    record, request_id = pending_upload(api, alice)
    own = releases.approve(request_id, alice)
    assert own.status_code == 403
    assert own.get_json()["message"].startswith("You own this record")
    # The administrator edits a public field: the request is cancelled, with what changed.
    assert api.patch(record["id"], admin, {"titel": "Neuer Titel"}).status_code == 200
    cancelled = api.get(f"/api/release-requests/{request_id}", alice).get_json()
    assert cancelled["state"] == "cancelled"
    assert cancelled["changes"] == {"titel": ["Bericht", "Neuer Titel"]}
    # Submitted again by bob (no owner): neither he nor the editing administrator may approve.
    assert releases.submit(record["id"], bob).status_code == 404
    again = releases.submit(record["id"], alice, note="Titel korrigiert")
    assert again.status_code == 201
    second = again.get_json()["id"]
    refused = releases.approve(second, admin)
    assert refused.status_code == 403
    assert "changed this record" in refused.get_json()["message"]
    assert "override_reason" in refused.get_json()["message"]
    assert api.row(record["id"]).freigabe is False
    response = releases.approve(second, bob)
    assert response.status_code == 200, response.get_json()
    assert api.row(record["id"]).freigabe is True


def test_a_non_approver_gets_403_and_nothing_changes(
    api: Api, alice: Account, bob: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice)
    response = releases.approve(request_id, bob)
    assert response.status_code == 403
    assert "Only approvers" in response.get_json()["message"]
    assert releases.act(request_id, "decline", bob, reason="nein").status_code == 403
    assert releases.state(request_id) == "pending"
    assert api.row(record["id"]).freigabe is False


def test_an_administrator_overrides_only_with_a_reason_which_is_audited_and_reported(
    app: Flask, api: Api, admin: Account, releases: Releases
):
    record, request_id = pending_upload(api, admin)
    assert releases.approve(request_id, admin).status_code == 403
    assert releases.state(request_id) == "pending"
    response = releases.approve(request_id, admin, override_reason="=Eilmeldung, allein im Dienst")
    assert response.status_code == 200
    assert response.get_json()["override"] is True
    assert api.row(record["id"]).freigabe is True
    [override] = [e for e in audit_actions(app, record["id"]) if e[0] == "release.override"]
    assert override[1] == admin.email
    assert override[2]["reason"] == "=Eilmeldung, allein im Dienst"
    month = date.today().strftime("%Y-%m")
    result = app.test_cli_runner().invoke(args=["releases", "report", "--month", month])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.output)))
    assert [(r["request_id"], r["state"], r["override"]) for r in rows] == [
        (request_id, "approved", "yes")
    ]
    assert rows[0]["submitted_by"] == rows[0]["decided_by"] == admin.email
    assert rows[0]["reason"] == "'=Eilmeldung, allein im Dienst"


def test_a_replaced_content_cancels_the_request_and_the_old_approval_is_refused(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice)
    new_bytes = samples.pdf_bytes() + b"\n% v2\n"
    assert api.replace(alice, record["id"], "v2.pdf", new_bytes).status_code == 200
    assert releases.state(request_id) == "cancelled"
    changes = api.get(f"/api/release-requests/{request_id}", carol).get_json()["changes"]
    assert set(changes) == {"checksum_sha256", "original_name"}
    response = releases.approve(request_id, carol)
    assert response.status_code == 409
    assert api.row(record["id"]).freigabe is False
    assert [a for a, _, _ in audit_actions(app, record["id"])].count("release.cancel") == 1


def test_patch_asking_for_release_opens_a_request_and_says_so(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record = api.create(alice, freigabe="0")
    response = api.patch(record["id"], alice, {"freigabe": True, "titel": "Fertig"})
    assert response.status_code == 200
    body = response.get_json()
    assert body["freigabe"] is False and body["titel"] == "Fertig"
    assert body["release_request"]["state"] == "pending"
    assert api.row(record["id"]).freigabe is False
    # Its editors read what they asked for (a release, waiting): the DataHub client's
    # unchanged save of what it read keeps the request.
    read = api.get(f"/api/files/{record['id']}", alice).get_json()
    assert (read["freigabe"], read["release_request"]) == (True, body["release_request"])
    again = api.patch(record["id"], alice, {"freigabe": read["freigabe"], "titel": "Fertig"})
    assert again.get_json()["release_request"] == body["release_request"]
    assert releases.approve(body["release_request"]["id"], carol).status_code == 200
    assert api.row(record["id"]).titel == "Fertig"


def test_a_released_record_keeps_what_the_public_sees(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice, sperrfrist=FUTURE)
    assert releases.approve(request_id, carol).status_code == 200
    objects = api.objects()
    # A new title and new bytes wait for approval (tests/releases/test_held_changes.py);
    # withdrawn, they leave nothing behind.
    held = api.patch(record["id"], alice, {"titel": "Anders"})
    assert held.status_code == 200
    assert held.get_json()["release_request"]["pending"]["fields"] == {"titel": "Anders"}
    replaced = api.replace(alice, record["id"], "v2.pdf", samples.pdf_bytes() + b"%v2")
    assert replaced.status_code == 200
    waiting = replaced.get_json()["release_request"]
    assert waiting["pending"]["fields"] == {"titel": "Anders"}
    assert releases.act(waiting["id"], "cancel", alice).status_code == 200
    assert api.objects() == objects
    row = api.row(record["id"])
    assert (row.titel, row.freigabe) == ("Bericht", True)
    refused = api.patch(record["id"], alice, {"freigegeben_von": "Ich"})
    assert refused.status_code == 409
    # Not public: no approval needed. Later embargo: at once.
    assert api.patch(record["id"], alice, {"erstellt_von": "Referat 3"}).status_code == 200
    assert api.patch(record["id"], alice, {"sperrfrist": LATER}).status_code == 200
    assert api.row(record["id"]).sperrfrist.isoformat() == LATER
    # An earlier embargo waits for an approval; the public keeps the approved one.
    earlier = api.patch(record["id"], alice, {"sperrfrist": None})
    assert earlier.status_code == 200
    asked = earlier.get_json()["release_request"]
    assert (asked["kind"], asked["sperrfrist"]) == ("sperrfrist", None)
    assert api.row(record["id"]).sperrfrist.isoformat() == LATER
    assert api.get(f"/api/public/files/{record['id']}/download").status_code == 403
    assert releases.approve(asked["id"], alice).status_code == 403
    assert releases.approve(asked["id"], carol).status_code == 200
    assert api.row(record["id"]).sperrfrist is None
    assert api.get(f"/api/public/files/{record['id']}/download").status_code == 200
    # Unreleasing needs nobody.
    assert api.patch(record["id"], alice, {"freigabe": False}).status_code == 200
    assert api.get(f"/api/public/files/{record['id']}").status_code == 404


def test_decline_needs_a_reason_and_tells_the_submitter(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice)
    assert releases.outbox() == [(carol.email, "Release request: Bericht")]
    for body in ({}, {"reason": "  "}):
        missing = releases.act(request_id, "decline", carol, **body)
        assert missing.status_code == 422
        assert list(missing.get_json()["errors"]) == ["reason"]
    declined = releases.act(request_id, "decline", carol, reason="Falsche Fassung")
    assert declined.status_code == 200
    assert (declined.get_json()["state"], declined.get_json()["reason"]) == (
        "declined",
        "Falsche Fassung",
    )
    assert releases.outbox()[-1] == (
        alice.email,
        "Release request declined: Bericht",
    )
    assert api.row(record["id"]).freigabe is False
    actions = [a for a, _, _ in audit_actions(app, record["id"])]
    assert actions == ["file.create", "release.submit", "release.decline"]


def test_submit_cancel_and_the_lists(
    api: Api, alice: Account, bob: Account, carol: Account, releases: Releases
):
    record = api.create(alice, freigabe="0")
    assert releases.submit(record["id"], bob).status_code == 404
    submitted = releases.submit(record["id"], alice, note="Bitte prüfen")
    assert submitted.status_code == 201
    request_id = submitted.get_json()["id"]
    assert submitted.get_json()["note"] == "Bitte prüfen"
    assert releases.submit(record["id"], alice).status_code == 409
    assert releases.listed(bob).get_json()["data"] == []
    assert [r["id"] for r in releases.listed(alice).get_json()["data"]] == [request_id]
    assert releases.listed(carol, state="approved").get_json()["data"] == []
    bad = releases.listed(carol, state="open")
    assert bad.status_code == 422 and list(bad.get_json()["errors"]) == ["state"]
    assert releases.act(request_id, "cancel", bob).status_code == 404
    assert releases.act(request_id, "cancel", alice, reason="zu früh").status_code == 200
    assert releases.state(request_id) == "cancelled"
    assert releases.approve(request_id, carol).status_code == 409


def test_deleting_a_record_cancels_its_request(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice)
    assert api.delete(record["id"], alice).status_code == 204
    assert releases.state(request_id) == "cancelled"
    assert releases.approve(request_id, carol).status_code == 409


def test_an_imported_record_waits_for_approval(app: Flask, api: Api, tmp_path, carol: Account):
    owner = api.account("archiv@example.org")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "bericht.pdf").write_bytes(samples.pdf_bytes())
    result = app.test_cli_runner().invoke(
        args=["import", str(tmp_path / "in"), "--owner", owner.email]
    )
    assert result.exit_code == 0, result.output
    [row] = api.rows()
    assert row.freigabe is False
    with app.app_context():
        [request] = db.session.scalars(select(ReleaseRequest)).all()
        assert (request.record_id, request.submitted_by, request.state) == (
            row.id,
            owner.id,
            "pending",
        )
        db.session.remove()


def test_the_approver_role_is_granted_and_revoked_by_command(
    app: Flask, api: Api, alice: Account, bob: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice)
    runner = app.test_cli_runner()
    assert "now an approver" in runner.invoke(args=["users", "grant-approver", bob.email]).output
    assert "already" in runner.invoke(args=["users", "grant-approver", bob.email]).output
    assert runner.invoke(args=["users", "revoke-approver", bob.email]).exit_code == 0
    assert releases.approve(request_id, bob).status_code == 403
    missing = runner.invoke(args=["users", "grant-approver", "nobody@example.org"])
    assert missing.exit_code == 1
    with app.app_context():
        grants = db.session.scalars(
            select(AuditEntry.changes).where(AuditEntry.account_id == bob.id)
        ).all()
        db.session.remove()
    assert [json.loads(c) for c in grants][-2:] == [
        {"is_approver": [False, True]},
        {"is_approver": [True, False]},
    ]


def test_a_tus_upload_asking_for_release_waits_for_approval(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    body = b"Ein Bericht, Zeile fuer Zeile.\n" * 40
    metadata = ",".join(
        f"{key} {base64.b64encode(value).decode()}"
        for key, value in (("filename", b"bericht.txt"), ("freigabe", b"true"))
    )
    tus = {"Tus-Resumable": "1.0.0", **alice.auth}
    created = api.client.post(
        "/api/uploads",
        data=body,
        headers={**tus, "Upload-Length": str(len(body)), "Upload-Metadata": metadata},
        content_type="application/offset+octet-stream",
    )
    assert created.status_code == 201, created.data
    [row] = api.rows()
    assert row.freigabe is False
    [pending] = releases.listed(carol, state="pending").get_json()["data"]
    assert (pending["record_id"], pending["submitted_by"]) == (str(row.id), alice.email)
    assert releases.approve(pending["id"], carol).status_code == 200
    assert api.get(f"/api/public/files/{row.id}/download").data == body


def test_an_approver_downloads_exactly_the_content_under_review(
    api: Api, alice: Account, bob: Account, carol: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice)
    path = f"/api/release-requests/{request_id}/content"
    assert api.get(f"/api/files/{record['id']}/download", carol).status_code == 404
    review = api.get(path, carol)
    assert review.status_code == 200
    assert review.data == samples.pdf_bytes()
    assert review.headers["Cache-Control"] == "private, no-store"
    assert api.get(path, alice).status_code == 403
    assert api.get(path, bob).status_code == 404
    assert (
        api.replace(alice, record["id"], "v2.pdf", samples.pdf_bytes() + b"%v2").status_code == 200
    )
    assert api.get(path, carol).status_code == 409


def test_kept_versions_are_those_an_approval_made_public(
    app: Flask, api: Api, alice: Account, carol: Account, admin: Account, releases: Releases
):
    """With KEEP_RELEASED_VERSIONS on too: content an approval released is kept when it is
    replaced; content that asked for release but was never approved was never public and goes
    (the rule decides first what the public sees, then whether the content has been public)."""
    app.config["KEEP_RELEASED_VERSIONS"] = "on"
    waiting, _ = pending_upload(api, alice)
    approved, request_id = pending_upload(api, alice)
    assert releases.approve(request_id, carol).status_code == 200
    assert api.patch(approved["id"], alice, {"freigabe": False}).status_code == 200
    for record in (waiting, approved):
        replaced = api.replace(alice, record["id"], "neu.txt", b"korrigiert\n")
        assert replaced.status_code == 200, replaced.get_json()
        assert replaced.get_json()["version"] == 2
    kept = api.get(f"/api/files/{approved['id']}/versions/1/download", admin)
    assert kept.status_code == 200 and kept.data == samples.pdf_bytes()
    gone = api.get(f"/api/files/{waiting['id']}/versions/1/download", admin)
    assert gone.status_code == 404
    assert [
        v["kept"] for v in api.get(f"/api/files/{waiting['id']}/versions", alice).get_json()["data"]
    ] == [False]


def test_the_list_pages_with_a_cursor_newest_first(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    api.app.config["PAGE_SIZE"] = 2
    opened = [pending_upload(api, alice)[1] for _ in range(5)]
    seen: list[str] = []
    query: dict[str, str] = {"state": "pending"}
    while True:
        answer = releases.listed(carol, **query)
        assert answer.status_code == 200
        body = answer.get_json()
        assert len(body["data"]) <= 2
        seen += [r["id"] for r in body["data"]]
        if body["next_cursor"] is None:
            assert body["next_page_url"] is None
            break
        assert "state=pending" in body["next_page_url"]
        query = {"state": "pending", "cursor": body["next_cursor"]}
    assert sorted(seen) == sorted(opened) and len(seen) == 5
    api.app.config["PAGE_SIZE"] = 100
    assert [r["id"] for r in releases.listed(carol, state="pending").get_json()["data"]] == seen
    bad = releases.listed(carol, cursor="kein-cursor")
    assert bad.status_code == 422 and list(bad.get_json()["errors"]) == ["cursor"]
