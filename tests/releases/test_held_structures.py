"""Issue 49's public fields under RELEASE_APPROVAL=on (docs/approval.md, "What waits"): a
released record's new creators, links and place in a series wait in its draft like every
other public field, bound by the request's `public_hash`; the public keeps the approved ones
until an approver puts the draft in place."""

from __future__ import annotations

import json

from tests.files.test_creators import ERIKA, INSTITUTE
from tests.files.test_editions import edition
from tests.files.test_related_identifiers import link
from tests.pages.test_related import related
from tests.releases.conftest import Releases
from tests.releases.test_approving import expected_hash
from tests.releases.test_held_changes import released
from tests.support.api import Account, Api


def test_new_creators_of_a_released_record_wait_and_are_bound_by_the_request(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases, autoren="Muster, Erika")
    changed = api.patch(record["id"], alice, {"creators": [ERIKA, INSTITUTE]})
    assert changed.status_code == 200
    waiting = changed.get_json()["release_request"]
    assert waiting["pending"]["fields"] == {
        "creators": [ERIKA, INSTITUTE],
        "autoren": "Muster, Erika; Institut für Beispiele",
    }
    public = api.get(f"/api/public/files/{record['id']}").get_json()
    assert (public["creators"], public["autoren"]) == (None, "Muster, Erika")
    # Its editors read what they asked for.
    form = api.get(f"/api/files/{record['id']}", alice).get_json()
    assert form["creators"] == [ERIKA, INSTITUTE]
    shown = api.get(f"/api/release-requests/{waiting['id']}", carol).get_json()
    assert shown["public_hash"] == expected_hash(shown["record"], shown["pending"])

    # The DataHub client saves its whole form (it sends the autoren it read): nothing moves.
    whole = {name: form[name] for name in ("titel", "autoren", "iab_themen")}
    again = api.patch(record["id"], alice, whole).get_json()["release_request"]
    assert again["id"] == waiting["id"]
    assert releases.approve(waiting["id"], carol).status_code == 200
    public = api.get(f"/api/public/files/{record['id']}").get_json()
    assert public["creators"] == [ERIKA, INSTITUTE]
    assert shown["public_hash"] == expected_hash(public)


def test_a_renamed_author_in_the_whole_form_keeps_the_waiting_identifiers(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases, creators=json.dumps([ERIKA]))
    form = api.get(f"/api/files/{record['id']}", alice).get_json()
    assert form["creators"] == [ERIKA] and form["release_request"] is None
    body = api.patch(record["id"], alice, {"autoren": "Muster, Erika; Neu, Hans"}).get_json()
    fields = body["release_request"]["pending"]["fields"]
    assert fields["creators"] == [ERIKA, {"family_name": "Neu", "given_name": "Hans"}]
    back = api.patch(record["id"], alice, {"autoren": "Muster, Erika"}).get_json()
    assert back["release_request"] is None  # the change back withdrew it
    assert api.get(f"/api/public/files/{record['id']}").get_json()["creators"] == [ERIKA]


def test_a_new_link_waits_and_shows_on_neither_page_until_approved(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    data = released(api, alice, carol, releases, aktiv_id="D-1")
    report = released(api, alice, carol, releases, aktiv_id="R-1")
    wanted = [link(data["id"])]
    waiting = api.patch(report["id"], alice, {"related_identifiers": wanted}).get_json()
    request = waiting["release_request"]
    assert request["pending"]["fields"] == {"related_identifiers": wanted}
    assert related(api, data["id"]) == [] and related(api, report["id"]) == []
    assert api.get(f"/api/public/files/{report['id']}").get_json()["related_identifiers"] == []
    assert releases.approve(request["id"], carol).status_code == 200
    assert related(api, data["id"]) == [
        ("Ergänzt", [("Bericht", f"http://localhost/records/{report['id']}")])
    ]


def test_a_place_in_a_series_waits_too(
    api: Api, admin: Account, alice: Account, carol: Account, releases: Releases
):
    made = api.client.post(
        "/api/series", json={"slug": "berichte", "title": "Berichte"}, headers=admin.auth
    )
    assert made.status_code == 201
    record = released(api, alice, carol, releases)
    place = {"slug": "berichte", "number": "3"}
    waiting = api.patch(record["id"], alice, {"series": place}).get_json()["release_request"]
    assert waiting["pending"]["fields"] == {"series": place}
    assert api.get(f"/api/public/files/{record['id']}").get_json()["series"] is None
    assert api.get(f"/api/files/{record['id']}", alice).get_json()["series"] == place
    shown = api.get(f"/api/release-requests/{waiting['id']}", carol).get_json()
    assert shown["public_hash"] == expected_hash(shown["record"], shown["pending"])
    assert releases.approve(waiting["id"], carol).status_code == 200
    assert api.get(f"/api/public/files/{record['id']}").get_json()["series"] == place


def test_a_new_edition_waits_for_its_release_and_only_then_shows_on_the_older_page(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    older = released(api, alice, carol, releases)
    response = edition(api, alice, older["id"], titel="Zweite Auflage")
    assert response.status_code == 201
    body = response.get_json()
    [newer] = body["files"]
    assert newer["freigabe"] is False
    [request] = body["release_requests"]
    page = api.client.get(f"/records/{older['id']}").get_data(as_text=True)
    assert "newer-edition" not in page and "Zweite Auflage" not in page
    assert releases.approve(request["id"], carol).status_code == 200
    page = api.client.get(f"/records/{older['id']}").get_data(as_text=True)
    assert 'class="newer-edition"' in page and "Zweite Auflage" in page
