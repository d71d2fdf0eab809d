"""What a released record's editors want waits in a draft beside it (issue 46): what they read
back, what a client saving its whole form keeps, and the rules around it that an outsider
tried (the approver's name, editors with the setting off, notes a release makes public, the
rate of release requests)."""

from __future__ import annotations

from typing import Any

from flask import Flask

from app import create_app
from app.extensions import db
from app.models import DRAFT_NUMBER, FileVersion
from tests.releases.conftest import Releases
from tests.releases.test_held_changes import V2, released
from tests.releases.test_requests import pending_upload
from tests.support.api import Account, Api

#: The fields the DataHub client's edit form holds, filled from GET /api/files/{id} and sent
#: back whole on every save (its `iab_themen` is `org_themen`).
FORM = (
    "aktiv_id",
    "path",
    "reprotyp",
    "titel",
    "beschreibung",
    "autoren",
    "sachschlagwoerter",
    "iab_themen",
    "sperrfrist",
    "reihenfolge",
    "freigabe",
    "erstellt_von",
    "freigegeben_von",
)


def form_of(api: Api, record_id: str, account: Account) -> dict[str, Any]:
    """The client's form: the record as its user reads it."""
    read = api.get(f"/api/files/{record_id}", account)
    assert read.status_code == 200
    return {name: read.get_json()[name] for name in FORM}


def save(api: Api, record_id: str, account: Account, **edits: Any) -> dict[str, Any]:
    """The client's save: the whole form, with the user's edits."""
    response = api.patch(record_id, account, {**form_of(api, record_id, account), **edits})
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def test_whole_form_saves_keep_what_waits(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    # Uploaded: its release waits, and the form reads what alice asked for.
    record, request_id = pending_upload(api, alice, freigabe="true")
    read = api.get(f"/api/files/{record['id']}", alice).get_json()
    assert read["freigabe"] is True and read["release_request"]["id"] == request_id
    assert api.get(f"/api/public/files/{record['id']}").status_code == 404
    # A typo fixed: the release still waits (a new request, bound to the fixed title).
    fixed = save(api, record["id"], alice, titel="Bericht 2026")
    waiting = fixed["release_request"]
    assert waiting is not None and waiting["kind"] == "release"
    assert releases.state(request_id) == "cancelled"
    # A field the public does not see saved: the release still waits, the same request.
    again = save(api, record["id"], alice, erstellt_von="Redaktion")
    assert again["release_request"] is not None
    assert again["release_request"]["id"] == waiting["id"]
    assert releases.approve(waiting["id"], carol).status_code == 200
    assert api.get(f"/api/public/files/{record['id']}").get_json()["titel"] == "Bericht 2026"
    # Released: a new title waits, and the form reads it, while the public keeps the old.
    held = save(api, record["id"], alice, titel="Bericht 2026 (korrigiert)")["release_request"]
    assert held["pending"]["fields"] == {"titel": "Bericht 2026 (korrigiert)"}
    read = api.get(f"/api/files/{record['id']}", alice).get_json()
    assert read["titel"] == "Bericht 2026 (korrigiert)" and read["release_request"] == held
    listed = api.get("/api/files", alice).get_json()["data"][0]
    assert listed["titel"] == "Bericht 2026 (korrigiert)"
    assert api.get(f"/api/public/files/{record['id']}").get_json()["titel"] == "Bericht 2026"
    # Another field saved with the whole form: the waiting title stays, the same request.
    kept = save(api, record["id"], alice, erstellt_von="Redaktion")
    assert kept["release_request"] == held
    shown = api.get(f"/api/release-requests/{held['id']}", carol).get_json()
    assert (shown["state"], shown["pending"]["fields"]) == (
        "pending",
        {"titel": "Bericht 2026 (korrigiert)"},
    )
    # Only a different value withdraws it: the approved title sent back.
    back = save(api, record["id"], alice, titel="Bericht 2026")
    assert back["release_request"] is None
    assert releases.state(held["id"]) == "cancelled"
    assert api.get(f"/api/files/{record['id']}", alice).get_json()["titel"] == "Bericht 2026"


def test_freigabe_false_sent_while_a_release_waits_withdraws_it(
    api: Api, alice: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice)
    answer = api.patch(record["id"], alice, {"freigabe": False}).get_json()
    assert answer["release_request"] is None
    shown = api.get(f"/api/release-requests/{request_id}", alice).get_json()
    assert (shown["state"], shown["reason"], shown["changes"]) == ("cancelled", "withdrawn", None)
    read = api.get(f"/api/files/{record['id']}", alice).get_json()
    assert (read["freigabe"], read["release_request"]) == (False, None)


def test_the_draft_is_a_version_row_beside_the_record(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    api.patch(record["id"], alice, {"titel": "Neu"})
    api.replace(alice, record["id"], "v2.pdf", V2, change_note="Tabelle korrigiert")
    with app.app_context():
        draft = db.session.get(FileVersion, (__import__("uuid").UUID(record["id"]), DRAFT_NUMBER))
        assert draft is not None and draft.state == "draft"
        assert (draft.titel, draft.original_name, draft.change_note) == (
            "Neu",
            "v2.pdf",
            "Tabelle korrigiert",
        )
        assert draft.stored_path in api.objects()
        db.session.remove()
    # Not a version anyone lists or downloads.
    assert api.get(f"/api/files/{record['id']}/versions", alice).get_json()["total"] == 0
    for path in (
        f"/api/files/{record['id']}/versions/0/download",
        f"/api/public/files/{record['id']}/versions/0/download",
    ):
        assert api.get(path, alice).status_code == 404


def test_only_an_approval_sets_the_approvers_name(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record, _ = pending_upload(api, alice)
    refused = api.patch(record["id"], alice, {"freigegeben_von": "Niemand"})
    assert refused.status_code == 409
    assert refused.get_json()["message"] == (
        "RELEASE_APPROVAL is on: only an approval sets freigegeben_von."
    )
    assert api.row(record["id"]).freigegeben_von is None
    created = api.upload(alice, titel="T", freigegeben_von="Niemand")
    assert created.status_code == 422
    assert created.get_json()["errors"] == {
        "freigegeben_von": ["RELEASE_APPROVAL is on: only an approval sets freigegeben_von."]
    }
    assert api.objects() == {api.row(record["id"]).stored_path}
    # The same value (a whole-form save) is no change.
    assert api.patch(record["id"], alice, {"freigegeben_von": None}).status_code == 200


def test_editors_with_the_setting_off_are_remembered(
    api: Api, alice: Account, admin: Account, releases: Releases, app: Flask
):
    record = api.create(alice, freigabe="false")
    app.config["RELEASE_APPROVAL"] = "off"
    assert api.patch(record["id"], admin, {"titel": "T2"}).status_code == 200
    app.config["RELEASE_APPROVAL"] = "on"
    # The administrator changed it while the setting was off: not his to approve now.
    submitted = releases.submit(record["id"], alice)
    assert submitted.status_code == 201
    refused = releases.approve(submitted.get_json()["id"], admin)
    assert refused.status_code == 403
    assert "changed this record" in refused.get_json()["message"]


def test_notes_a_release_makes_public_are_shown_to_its_approver(
    api: Api, alice: Account, carol: Account, releases: Releases, app: Flask
):
    app.config["KEEP_RELEASED_VERSIONS"] = "on"
    record = released(api, alice, carol, releases)
    assert api.patch(record["id"], alice, {"freigabe": False}).status_code == 200
    replaced = api.replace(alice, record["id"], "v2.pdf", V2, change_note="intern: Zahlen falsch")
    assert replaced.status_code == 200
    submitted = releases.submit(record["id"], alice)
    request_id = submitted.get_json()["id"]
    shown = api.get(f"/api/release-requests/{request_id}", carol).get_json()
    assert shown["change_notes"] == [{"version": 1, "change_note": "intern: Zahlen falsch"}]
    assert releases.approve(request_id, carol).status_code == 200
    page = api.client.get(f"/records/{record['id']}").get_data(as_text=True)
    assert "intern: Zahlen falsch" in page  # what the approver saw is what the page shows


def test_release_requests_share_the_writes_rate_limit(api: Api, alice: Account, stack_config: dict):
    record, request_id = pending_upload(api, alice)
    limited_app = create_app(
        {**stack_config, "RATELIMIT_ENABLED": True, "RATELIMIT_WRITES": "3/minute"}
    )
    limited = Releases(Api(limited_app, limited_app.test_client()))
    statuses = [limited.act(request_id, "cancel", alice).status_code]
    statuses.append(limited.submit(record["id"], alice).status_code)
    cancel_again = limited.listed(alice, state="pending").get_json()["data"][0]["id"]
    statuses.append(limited.act(cancel_again, "cancel", alice).status_code)
    refused = limited.submit(record["id"], alice)
    assert statuses == [200, 201, 200]
    assert refused.status_code == 429 and "Retry-After" in refused.headers
    with limited_app.app_context():
        db.engine.dispose()


def test_updated_at_moves_with_every_write_of_the_record_itself(
    api: Api, alice: Account, carol: Account, releases: Releases, app: Flask
):
    def updated(record_id: str) -> str:
        return api.get(f"/api/files/{record_id}", alice).get_json()["updated_at"]

    unreleased = api.create(alice, freigabe="false")
    before = updated(unreleased["id"])
    assert api.patch(unreleased["id"], alice, {"titel": "T2"}).status_code == 200
    assert updated(unreleased["id"]) != before
    record = released(api, alice, carol, releases)
    before = updated(record["id"])
    assert api.patch(record["id"], alice, {"freigabe": False}).status_code == 200
    assert updated(record["id"]) != before
    app.config["RELEASE_APPROVAL"] = "off"
    before = updated(record["id"])
    assert api.patch(record["id"], alice, {"titel": "T3"}).status_code == 200
    assert updated(record["id"]) != before


def test_a_change_request_names_no_embargo_unless_it_is_one(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases, sperrfrist="2099-01-01")
    asked = api.patch(record["id"], alice, {"titel": "T2"}).get_json()["release_request"]
    assert (asked["kind"], asked["sperrfrist"]) == ("change", None)
    shown = api.get(f"/api/release-requests/{asked['id']}", carol).get_json()
    assert (shown["kind"], shown["sperrfrist"]) == ("change", None)
