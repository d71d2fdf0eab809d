"""Who cancelled a request, why and with what change, as GET /api/release-requests/{id}
tells it, when a write of a record supersedes, withdraws or cancels what waited (the release
rule's drafts, app/files/approval.py)."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from tests.releases.conftest import Releases
from tests.releases.test_held_changes import V1, V2, V3, public_view, released, sha256
from tests.releases.test_requests import FUTURE, LATER, pending_upload
from tests.support.api import Account, Api

EARLIER = (date.today() + timedelta(days=100)).isoformat()
EDITOR_REFUSAL = (
    "You changed this record's content or public fields since its last approval: "
    "another approver must approve it. As an administrator you may override this only with a "
    "reason (override_reason)."
)


def decision(api: Api, request_id: str, account: Account) -> tuple[Any, ...]:
    """A request's state, who decided it, why, and what changed, as its reader sees them."""
    answer = api.get(f"/api/release-requests/{request_id}", account)
    assert answer.status_code == 200
    body = answer.get_json()
    return body["state"], body["decided_by"], body["reason"], body["changes"]


def held(response: Any) -> dict:
    """The request a write of a released record answers with (it must hold one)."""
    assert response.status_code == 200, response.get_json()
    request = response.get_json()["release_request"]
    assert request is not None and request["state"] == "pending"
    return request


def test_unreleasing_with_an_edit_cancels_the_waiting_change_and_notes_the_editor(
    api: Api, alice: Account, admin: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    asked = held(api.patch(record["id"], alice, {"titel": "T2"}))
    response = api.patch(record["id"], admin, {"freigabe": False, "beschreibung": "B2"})
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["release_request"] is None
    assert decision(api, asked["id"], alice) == (
        "cancelled",
        admin.email,
        "unreleased",
        {"beschreibung": [None, "B2"]},
    )
    # The administrator changed a public field: he may not approve its next release.
    again = releases.submit(record["id"], alice)
    assert again.status_code == 201
    refused = releases.approve(again.get_json()["id"], admin)
    assert refused.status_code == 403
    assert refused.get_json()["message"] == EDITOR_REFUSAL
    assert releases.approve(again.get_json()["id"], carol).status_code == 200


def test_a_new_approver_name_on_a_released_record_is_refused_word_for_word(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    refused = api.patch(record["id"], alice, {"freigegeben_von": "Ich"})
    assert refused.status_code == 409
    assert refused.get_json()["message"] == (
        "The record is released and RELEASE_APPROVAL is on: only an approval sets freigegeben_von."
    )
    assert api.row(record["id"]).freigegeben_von == releases.name_of(carol)


def test_an_edit_of_an_unreleased_record_cancels_its_request_by_whom_and_why(
    api: Api, alice: Account, admin: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice)
    response = api.patch(record["id"], admin, {"titel": "T2"})
    assert response.status_code == 200
    assert response.get_json()["release_request"] is None
    assert decision(api, request_id, alice) == (
        "cancelled",
        admin.email,
        "changed",
        {"titel": ["Bericht", "T2"]},
    )


def test_an_edit_asking_for_release_opens_a_new_request_by_the_editor(
    api: Api, alice: Account, admin: Account, carol: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice)
    response = api.patch(record["id"], admin, {"titel": "T2", "freigabe": True})
    asked = held(response)
    assert response.get_json()["freigabe"] is False
    assert asked["id"] != request_id and asked["kind"] == "release"
    assert decision(api, request_id, alice)[:3] == ("cancelled", admin.email, "changed")
    opened = api.get(f"/api/release-requests/{asked['id']}", alice).get_json()
    assert (opened["state"], opened["submitted_by"]) == ("pending", admin.email)
    # Its submitter may not approve it; another approver may.
    assert releases.approve(asked["id"], admin).status_code == 403
    assert releases.approve(asked["id"], carol).status_code == 200
    assert public_view(api, record["id"])[0]["titel"] == "T2"


def test_a_later_embargo_applies_at_once_and_drops_an_earlier_one_that_waited(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases, sperrfrist=FUTURE)
    asked = held(api.patch(record["id"], alice, {"sperrfrist": None}))
    assert asked["kind"] == "sperrfrist"
    later = api.patch(record["id"], alice, {"sperrfrist": LATER})
    assert later.status_code == 200
    assert (later.get_json()["sperrfrist"], later.get_json()["release_request"]) == (LATER, None)
    assert api.row(record["id"]).sperrfrist.isoformat() == LATER
    assert decision(api, asked["id"], alice) == (
        "cancelled",
        alice.email,
        "changed",
        {"sperrfrist": [FUTURE, LATER]},
    )
    assert releases.listed(carol, state="pending").get_json()["data"] == []


def test_a_later_embargo_beside_a_waiting_title_rebinds_the_title_to_it(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    asked = held(api.patch(record["id"], alice, {"titel": "T2"}))
    response = api.patch(record["id"], alice, {"sperrfrist": FUTURE})
    again = held(response)
    assert response.get_json()["sperrfrist"] == FUTURE
    assert again["id"] != asked["id"]
    assert again["pending"] == {"fields": {"titel": "T2"}, "content": None}
    assert decision(api, asked["id"], alice) == (
        "cancelled",
        alice.email,
        "superseded by a new change",
        {"sperrfrist": [None, FUTURE]},
    )
    # The new request starts from the record with its new embargo: its approval goes through.
    approved = releases.approve(again["id"], carol)
    assert approved.status_code == 200, approved.get_json()
    row = api.row(record["id"])
    assert (row.titel, row.sperrfrist.isoformat()) == ("T2", FUTURE)


def test_a_later_embargo_with_another_field_holds_that_field(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    response = api.patch(record["id"], alice, {"sperrfrist": FUTURE, "reihenfolge": 5})
    asked = held(response)
    assert (response.get_json()["sperrfrist"], response.get_json()["reihenfolge"]) == (FUTURE, 0)
    assert asked["pending"] == {"fields": {"reihenfolge": 5}, "content": None}
    row = api.row(record["id"])
    assert (row.sperrfrist.isoformat(), row.reihenfolge) == (FUTURE, 0)


def test_a_further_title_supersedes_the_waiting_one_and_says_so(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    first = held(api.patch(record["id"], alice, {"titel": "T2"}))
    second = held(api.patch(record["id"], alice, {"titel": "T3"}))
    assert second["id"] != first["id"]
    assert second["pending"] == {"fields": {"titel": "T3"}, "content": None}
    assert decision(api, first["id"], alice) == (
        "cancelled",
        alice.email,
        "superseded by a new change",
        {"titel": ["Bericht", "T3"]},
    )


def test_one_field_set_back_supersedes_and_the_other_still_waits(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    first = held(api.patch(record["id"], alice, {"titel": "T2", "beschreibung": "B2"}))
    second = held(api.patch(record["id"], alice, {"titel": "Bericht"}))
    assert second["pending"] == {"fields": {"beschreibung": "B2"}, "content": None}
    assert decision(api, first["id"], alice) == (
        "cancelled",
        alice.email,
        "superseded by a new change",
        {"titel": ["T2", "Bericht"]},
    )
    # Set back too, nothing waits any more.
    last = api.patch(record["id"], alice, {"beschreibung": None})
    assert last.status_code == 200 and last.get_json()["release_request"] is None
    assert decision(api, second["id"], alice) == (
        "cancelled",
        alice.email,
        "withdrawn by a change back",
        {"beschreibung": ["B2", None]},
    )


def test_who_holds_a_change_of_a_released_record_may_not_approve_a_later_one(
    api: Api, alice: Account, admin: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    by_admin = held(api.patch(record["id"], admin, {"titel": "T2"}))
    assert releases.act(by_admin["id"], "cancel", alice).status_code == 200
    mine = held(api.patch(record["id"], alice, {"titel": "T3"}))
    refused = releases.approve(mine["id"], admin)
    assert refused.status_code == 403
    assert refused.get_json()["message"] == EDITOR_REFUSAL
    assert releases.approve(mine["id"], carol).status_code == 200
    assert public_view(api, record["id"])[0]["titel"] == "T3"


def test_an_earlier_embargo_waits_on_a_request_naming_it(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases, sperrfrist=FUTURE)
    asked = held(api.patch(record["id"], alice, {"sperrfrist": EARLIER}))
    assert (asked["kind"], asked["sperrfrist"]) == ("sperrfrist", EARLIER)
    shown = api.get(f"/api/release-requests/{asked['id']}", carol).get_json()
    assert (shown["kind"], shown["sperrfrist"]) == ("sperrfrist", EARLIER)
    assert api.row(record["id"]).sperrfrist.isoformat() == FUTURE
    assert releases.approve(asked["id"], carol).status_code == 200
    assert api.row(record["id"]).sperrfrist.isoformat() == EARLIER


def test_new_bytes_supersede_waiting_ones_and_the_approved_ones_withdraw_them(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    first = held(api.replace(alice, record["id"], "v2.pdf", V2))
    second = held(api.replace(alice, record["id"], "v3.pdf", V3))
    assert decision(api, first["id"], alice) == (
        "cancelled",
        alice.email,
        "superseded by a new change",
        {"checksum_sha256": [sha256(V2), sha256(V3)]},
    )
    back = api.replace(alice, record["id"], "bericht.pdf", V1)
    assert back.status_code == 200 and back.get_json()["release_request"] is None
    assert decision(api, second["id"], alice) == (
        "cancelled",
        alice.email,
        "changed",
        {"checksum_sha256": [sha256(V3), sha256(V1)]},
    )
    assert public_view(api, record["id"])[1] == V1


def test_a_change_back_is_noted_only_for_a_field_that_waited(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    first = held(api.patch(record["id"], alice, {"reihenfolge": 5}))
    # The approved title sent as it is (it never waited) beside a new description.
    second = held(api.patch(record["id"], alice, {"titel": "Bericht", "beschreibung": "B2"}))
    assert second["pending"]["fields"] == {"reihenfolge": 5, "beschreibung": "B2"}
    assert decision(api, first["id"], alice) == (
        "cancelled",
        alice.email,
        "superseded by a new change",
        {"beschreibung": [None, "B2"]},
    )


def test_updated_at_moves_with_what_changes_at_once_not_with_what_waits(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)

    def updated() -> str:
        return api.get(f"/api/files/{record['id']}", alice).get_json()["updated_at"]

    approved = updated()
    held(api.patch(record["id"], alice, {"titel": "T2"}))
    assert updated() == approved  # only the draft changed
    held(api.patch(record["id"], alice, {"titel": "T3", "erstellt_von": "Redaktion"}))
    assert updated() != approved  # erstellt_von changed at once
    again = updated()
    # A PATCH that holds nothing is a PATCH of the record, as the specification says.
    assert api.patch(record["id"], alice, {"freigabe": True}).status_code == 200
    assert updated() != again


def test_another_users_later_embargo_applies_and_the_waiting_title_stays(
    api: Api, alice: Account, admin: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    asked = held(api.patch(record["id"], alice, {"titel": "T2"}))
    response = api.patch(record["id"], admin, {"sperrfrist": FUTURE})
    assert response.status_code == 200, response.get_json()
    again = held(response)
    assert again["id"] != asked["id"]
    assert again["pending"] == {"fields": {"titel": "T2"}, "content": None}
    assert api.row(record["id"]).sperrfrist.isoformat() == FUTURE
