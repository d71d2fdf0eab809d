"""The owner's cover (`PUT`/`DELETE /api/files/{id}/cover`): type by its bytes, limited in
size, winning over the drawn one, for the owner and administrators only, and under the
release rule (issue 50, point 1)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.covers.conftest import Covers, coloured_png, pdf_page, picture
from tests.releases.conftest import grant_approver
from tests.support import samples
from tests.support.api import Account, Api


def test_the_owners_cover_wins_and_its_removal_brings_the_drawn_one_back(
    api: Api, alice: Account, covers: Covers
):
    record = api.create(alice, "talk.pdf", pdf_page(), freigabe="true")
    covers.make()
    drawn = covers.get(record["id"]).get_data()
    answer = covers.put(record["id"], alice, coloured_png("green", (800, 800)))
    assert answer.status_code == 202, answer.get_json()
    assert answer.get_json()["shown"] == "content"  # its own is not made yet
    assert covers.get(record["id"]).get_data() == drawn
    covers.make()
    response = covers.get(record["id"])
    image = picture(response)
    assert image.size == (1200, 1200) and image.getpixel((5, 5))[1] > 100
    status = covers.status(record["id"], alice)
    assert status["shown"] == "owner"
    assert {(c["origin"], c["state"]) for c in status["covers"]} == {
        ("owner", "made"),
        ("content", "made"),
    }
    uploads = {k for k in covers.keys() if not k.rsplit("-", 1)[-1].startswith(("200", "1200"))}
    assert len(uploads) == 1  # the owner's upload is kept under its own key
    assert covers.delete(record["id"], alice).status_code == 204
    assert covers.get(record["id"]).get_data() == drawn
    assert len(covers.keys()) == 4 and not covers.keys() & uploads
    assert covers.delete(record["id"], alice).status_code == 404


def test_audio_has_a_picture_only_from_its_owner(api: Api, alice: Account, covers: Covers):
    record = api.create(alice, "tone.ogg", samples.fixture("tone-vorbis.ogg"), freigabe="true")
    covers.make()
    assert covers.rows() == [] and covers.get(record["id"]).status_code == 404
    assert covers.put(record["id"], alice, coloured_png("orange")).status_code == 202
    covers.make()
    assert picture(covers.get(record["id"], "200.webp")).size == (200, 133)


@pytest.mark.parametrize(
    "body",
    [samples.pdf_bytes(), b"GIF89a<html>not an image", b"plain text", b""],
    ids=["pdf", "fake-gif", "text", "empty"],
)
def test_a_cover_must_be_an_image_by_its_bytes(
    api: Api, alice: Account, covers: Covers, body: bytes
):
    record = api.create(alice, freigabe="true")
    response = covers.put(record["id"], alice, body)
    assert response.status_code == 422
    assert list(response.get_json()["errors"]) == ["cover"]
    assert covers.rows(record["id"])[0].origin == "content"
    assert len(covers.rows(record["id"])) == 1 and covers.keys() == set()


def test_a_cover_over_the_limit_is_refused_and_nothing_is_kept(
    api: Api, alice: Account, covers: Covers
):
    api.app.config["COVER_MAX_KB"] = 1
    record = api.create(alice, freigabe="true")
    response = covers.put(record["id"], alice, coloured_png("red", (600, 600)) + b"\0" * 2048)
    assert response.status_code == 422
    assert "must not be greater than 1 kilobytes" in response.get_json()["errors"]["cover"][0]
    assert covers.keys() == set()


def test_only_the_owner_and_administrators(
    api: Api, alice: Account, bob: Account, admin: Account, covers: Covers
):
    record = api.create(alice, freigabe="true")
    assert covers.put(record["id"], bob, coloured_png("red")).status_code == 404
    assert covers.delete(record["id"], bob).status_code == 404
    assert api.client.get(f"/api/files/{record['id']}/cover", headers=bob.auth).status_code == 404
    assert api.client.put(f"/api/files/{record['id']}/cover", data=b"x").status_code == 401
    assert covers.put(record["id"], admin, coloured_png("red")).status_code == 202


def test_with_release_approval_a_released_records_cover_waits_for_nobody(
    api: Api, alice: Account, covers: Covers, app: Any
):
    """409 on a released record (the public would see an unapproved picture); a pending
    request is bound again to the record with its new cover."""
    app.config["RELEASE_APPROVAL"] = "on"
    carol = api.account("carol@example.org")
    grant_approver(app, carol)
    record = api.create(alice, "talk.pdf", pdf_page())
    pending = api.get(f"/api/files/{record['id']}", alice).get_json()["release_request"]["id"]
    assert covers.put(record["id"], alice, coloured_png("green")).status_code == 202
    now = api.get(f"/api/files/{record['id']}", alice).get_json()["release_request"]["id"]
    assert now != pending
    approved = api.client.post(f"/api/release-requests/{now}/approve", json={}, headers=carol.auth)
    assert approved.status_code == 200, approved.get_json()
    response = covers.put(record["id"], alice, coloured_png("red"))
    assert response.status_code == 409
    assert covers.delete(record["id"], alice).status_code == 409
    covers.make()
    assert picture(covers.get(record["id"])).getpixel((5, 5))[1] > 100  # still the green one


def test_an_owners_cover_is_in_the_audit_trail_and_drawn_ones_are_not(
    api: Api, alice: Account, covers: Covers
):
    from tests.releases.test_requests import audit_actions

    record = api.create(alice, "talk.pdf", pdf_page(), freigabe="true")
    covers.make()
    assert covers.put(record["id"], alice, coloured_png("green")).status_code == 202
    assert covers.delete(record["id"], alice).status_code == 204
    entries = [(a, actor, c) for a, actor, c in audit_actions(api.app, record["id"])]
    shown = [(a, actor, sorted(c)) for a, actor, c in entries if a.startswith("cover.")]
    assert shown == [
        ("cover.upload", alice.email, ["source", "source_type"]),
        ("cover.remove", alice.email, ["source", "source_type"]),
    ]
    assert entries[-1][2]["source_type"] == "image/png"
