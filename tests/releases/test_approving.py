"""The approval's answers word for word, what it cancels and deletes and forgets, and the
`public_hash` of a release request as a contract an approver's tool can check."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from flask import Flask
from sqlalchemy import delete

from app.extensions import db
from app.models import FileRecord
from tests.releases.conftest import Releases
from tests.releases.test_held_changes import V2, public_view, released, request_rows
from tests.releases.test_requests import pending_upload
from tests.support.api import Account, Api, parse_timestamp

#: The public fields a request's `public_hash` covers (app/releases/schemas.py).
HASHED = (
    "original_name",
    "mime_type",
    "aktiv_id",
    "path",
    "reprotyp",
    "titel",
    "beschreibung",
    "autoren",
    "sachschlagwoerter",
    "org_themen",
    "sperrfrist",
    "reihenfolge",
)
#: Issue 49's structured fields: hashed only when they hold a value.
STRUCTURED = ("creators", "related_identifiers", "series")
TITLE = "Übersicht der Straßenmaße – Größe Ω"
EMBARGO = "2020-02-29"


def expected_hash(record: dict[str, Any], pending: dict[str, Any] | None = None) -> str:
    """`public_hash` as its description defines it, from a record answer and, of a held
    change, what its approval sets."""
    values = {name: record[name] for name in (*HASHED, *STRUCTURED)}
    if pending is not None:
        values.update(pending["fields"])
        if pending["content"] is not None:
            values["original_name"] = pending["content"]["original_name"]
            values["mime_type"] = pending["content"]["mime_type"]
    values = {k: v for k, v in values.items() if k not in STRUCTURED or v}
    text = "{" + ",".join(
        f"{json.dumps(name)}:"
        + json.dumps(values[name], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        for name in sorted(values)
    )
    return hashlib.sha256((text + "}").encode("utf-8")).hexdigest()


def test_an_approval_with_the_setting_off_is_refused_word_for_word(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases
):
    record, request_id = pending_upload(api, alice)
    app.config["RELEASE_APPROVAL"] = "off"
    refused = releases.approve(request_id, carol)
    assert (refused.status_code, refused.get_json()["message"]) == (
        409,
        "RELEASE_APPROVAL is off: pending requests wait, unapproved, until it is on again "
        "(they may still be declined or cancelled).",
    )
    assert releases.state(request_id) == "pending"
    assert api.row(record["id"]).freigabe is False


def test_a_held_change_of_a_record_unreleased_meanwhile_is_cancelled_and_its_bytes_deleted(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    asked = api.replace(alice, record["id"], "v2.pdf", V2).get_json()["release_request"]
    approved_key = api.row(record["id"]).stored_path
    [waiting_key] = [key for _, _, key in request_rows(app, record["id"]) if key]
    assert api.objects() == {approved_key, waiting_key}
    # Unreleased with the setting off, which leaves the waiting change as it is.
    app.config["RELEASE_APPROVAL"] = "off"
    assert api.patch(record["id"], alice, {"freigabe": False}).status_code == 200
    app.config["RELEASE_APPROVAL"] = "on"

    refused = releases.approve(asked["id"], carol)
    assert (refused.status_code, refused.get_json()["message"]) == (
        409,
        "The record is no longer released; the request is cancelled.",
    )
    answer = api.get(f"/api/release-requests/{asked['id']}", alice).get_json()
    assert (answer["state"], answer["decided_by"], answer["reason"]) == (
        "cancelled",
        carol.email,
        "unreleased",
    )
    assert api.objects() == {approved_key}
    row = api.row(record["id"])
    assert (row.freigabe, row.stored_path, row.version) == (False, approved_key, 1)
    assert api.get(f"/api/public/files/{record['id']}").status_code == 404


def test_a_held_change_whose_record_row_is_gone_is_cancelled_and_its_bytes_deleted(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    asked = api.replace(alice, record["id"], "v2.pdf", V2).get_json()["release_request"]
    approved_key = api.row(record["id"]).stored_path
    with app.app_context():
        db.session.execute(delete(FileRecord).where(FileRecord.id == uuid.UUID(record["id"])))
        db.session.commit()
        db.session.remove()

    refused = releases.approve(asked["id"], carol)
    assert (refused.status_code, refused.get_json()["message"]) == (
        409,
        "The record is gone; the request is cancelled.",
    )
    answer = api.get(f"/api/release-requests/{asked['id']}", carol).get_json()
    assert (answer["state"], answer["decided_by"], answer["reason"]) == (
        "cancelled",
        carol.email,
        "record deleted",
    )
    # The draft went with the row removed by hand (its versions' rows cascade): its bytes,
    # like the approved ones, are left to `flask storage reconcile`, which finds both.
    waiting_key = {key for key in api.objects() if key != approved_key}
    assert len(waiting_key) == 1
    assert api.objects() == {approved_key, *waiting_key}


def test_an_approval_is_dated_and_forgets_its_records_editors_and_no_other_records(
    api: Api, alice: Account, carol: Account, admin: Account, releases: Releases
):
    approved, _ = pending_upload(api, alice)
    other, _ = pending_upload(api, alice)
    # The administrator edits both records (which cancels their requests): their editor.
    for record in (approved, other):
        assert api.patch(record["id"], admin, {"beschreibung": "korrigiert"}).status_code == 200
    approved_request = releases.submit(approved["id"], alice).get_json()["id"]
    other_request = releases.submit(other["id"], alice).get_json()["id"]

    before = datetime.now(UTC)
    answer = releases.approve(approved_request, carol)
    after = datetime.now(UTC)
    assert answer.status_code == 200, answer.get_json()
    body = answer.get_json()
    assert (body["state"], body["decided_by"]) == ("approved", carol.email)
    assert before <= parse_timestamp(body["decided_at"]) <= after
    shown = api.get(f"/api/release-requests/{approved_request}", alice).get_json()
    assert shown["decided_at"] == body["decided_at"]

    # The other record's editor is still its editor: the four-eyes rule refuses him.
    refused = releases.approve(other_request, admin)
    assert (refused.status_code, refused.get_json().get("message")) == (
        403,
        "You changed this record's content or public fields since its last approval: "
        "another approver must approve it. As an administrator you may override this only "
        "with a reason (override_reason).",
    )
    # The approved record's editors are forgotten: the administrator approves its next
    # change (the owner's), which he did not make.
    change = api.patch(approved["id"], alice, {"titel": "Neuer Titel"})
    assert change.status_code == 200, change.get_json()
    again = releases.approve(change.get_json()["release_request"]["id"], admin)
    assert again.status_code == 200, again.get_json()
    assert (again.get_json()["override"], again.get_json()["reason"]) == (False, None)
    assert public_view(api, approved["id"])[0]["titel"] == "Neuer Titel"


def test_the_public_hash_of_a_release_request_is_the_documented_hash_of_its_public_fields(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    uploaded = api.upload(
        alice,
        [("straßen übersicht.pdf", V2)],
        titel=TITLE,
        path="berichte/strassen-2024",
        autoren="Müller, Jürgen",
        sperrfrist=EMBARGO,
        reihenfolge="3",
    )
    assert uploaded.status_code == 201, uploaded.get_json()
    record = uploaded.get_json()["files"][0]
    [queued] = releases.listed(carol, state="pending").get_json()["data"]
    # An approver's tool checks the request against the record it shows.
    assert queued["record"]["titel"] == TITLE
    assert queued["public_hash"] == expected_hash(queued["record"])
    assert releases.approve(queued["id"], carol).status_code == 200
    # And the public sees exactly what was hashed.
    public = public_view(api, record["id"])[0]
    assert (public["titel"], public["sperrfrist"], public["aktiv_id"]) == (TITLE, EMBARGO, None)
    assert queued["public_hash"] == expected_hash(public)


def test_the_public_hash_of_a_held_change_is_that_of_the_fields_as_the_approval_sets_them(
    api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases, autoren="Müller, Jürgen")
    assert api.patch(record["id"], alice, {"titel": TITLE}).status_code == 200
    replaced = api.replace(alice, record["id"], "fassung-2 (überarbeitet).pdf", V2)
    asked = replaced.get_json()["release_request"]
    shown = api.get(f"/api/release-requests/{asked['id']}", carol).get_json()
    pending = shown["pending"]
    assert pending["fields"] == {"titel": TITLE}
    assert pending["content"]["original_name"] == "fassung-2 (überarbeitet).pdf"
    assert shown["record"]["titel"] == "Bericht"
    assert shown["public_hash"] == expected_hash(shown["record"], pending)
    assert shown["public_hash"] != expected_hash(shown["record"])

    assert releases.approve(asked["id"], carol).status_code == 200
    public = public_view(api, record["id"])[0]
    assert (public["titel"], public["original_name"]) == (TITLE, "fassung-2 (überarbeitet).pdf")
    assert shown["public_hash"] == expected_hash(public)
