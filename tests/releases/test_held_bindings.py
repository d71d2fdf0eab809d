"""A held change of a released record binds the state it starts from and the bytes it waits
with (issue 38, review findings): an approval never undoes a change made meanwhile, nor
releases bytes that are gone."""

from __future__ import annotations

import csv
import io
from datetime import date

import pytest
from flask import Flask

from app.storage import StorageUnavailable
from tests.releases.conftest import Releases
from tests.releases.test_held_changes import V1, V2, V3, public_view, released, request_rows
from tests.releases.test_requests import pending_upload
from tests.support.api import Account, Api


def test_an_approval_never_undoes_content_replaced_while_the_setting_was_off(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    asked = api.replace(alice, record["id"], "v2.pdf", V2).get_json()["release_request"]
    app.config["RELEASE_APPROVAL"] = "off"
    assert api.replace(alice, record["id"], "v3.pdf", V3).status_code == 200
    app.config["RELEASE_APPROVAL"] = "on"

    refused = releases.approve(asked["id"], carol)
    assert refused.status_code == 409, refused.get_json()
    assert "changed since" in refused.get_json()["message"]
    assert releases.state(asked["id"]) == "cancelled"
    assert public_view(api, record["id"])[1] == V3
    # The waiting V2 went with its request.
    assert api.objects() == {api.row(record["id"]).stored_path}


def test_an_approval_never_undoes_a_title_set_while_the_setting_was_off(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    asked = api.patch(record["id"], alice, {"titel": "T2"}).get_json()["release_request"]
    app.config["RELEASE_APPROVAL"] = "off"
    assert api.patch(record["id"], alice, {"titel": "T3"}).status_code == 200
    app.config["RELEASE_APPROVAL"] = "on"

    assert releases.approve(asked["id"], carol).status_code == 409
    assert releases.state(asked["id"]) == "cancelled"
    assert public_view(api, record["id"])[0]["titel"] == "T3"
    assert [state for _, state, _ in request_rows(app, record["id"])][-1] == "cancelled"


def test_an_approval_of_missing_waiting_bytes_is_refused_and_changes_nothing(
    app: Flask,
    api: Api,
    alice: Account,
    carol: Account,
    releases: Releases,
    monkeypatch: pytest.MonkeyPatch,
):
    record = released(api, alice, carol, releases)
    asked = api.replace(alice, record["id"], "v2.pdf", V2).get_json()["release_request"]
    storage = app.extensions["storage"]
    [(_, _, waiting_key)] = [row for row in request_rows(app, record["id"]) if row[2]]

    def unavailable(key: str) -> bool:
        raise StorageUnavailable("no route to host")

    with monkeypatch.context() as patched:
        patched.setattr(storage, "exists", unavailable)
        assert releases.approve(asked["id"], carol).status_code == 503
    assert releases.state(asked["id"]) == "pending"

    storage.delete(waiting_key)
    refused = releases.approve(asked["id"], carol)
    assert refused.status_code == 409
    assert "missing" in refused.get_json()["message"]
    assert releases.state(asked["id"]) == "pending"
    assert public_view(api, record["id"])[1] == V1
    assert api.row(record["id"]).version == 1

    runner = app.test_cli_runner()
    reconciled = runner.invoke(args=["storage", "reconcile"])
    assert reconciled.exit_code == 1
    assert f"{record['id']} change waiting for approval has no object ({waiting_key})" in (
        reconciled.output
    )
    verified = runner.invoke(args=["storage", "verify"])
    assert verified.exit_code == 1
    assert f"{record['id']} change waiting for approval: object {waiting_key} is missing" in (
        verified.output
    )


def test_verify_reads_the_waiting_bytes(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    api.replace(alice, record["id"], "v2.pdf", V2)
    runner = app.test_cli_runner()
    verified = runner.invoke(args=["storage", "verify"])
    assert verified.exit_code == 0, verified.output
    assert "1 waiting changes" in verified.output
    assert f"({len(V1) + len(V2)} bytes)" in verified.output


def test_a_refused_override_is_not_recorded_as_one(
    app: Flask, api: Api, admin: Account, releases: Releases
):
    record, request_id = pending_upload(api, admin)
    app.config["RELEASE_APPROVAL"] = "off"
    assert api.patch(record["id"], admin, {"titel": "Anders"}).status_code == 200
    app.config["RELEASE_APPROVAL"] = "on"
    refused = releases.approve(request_id, admin, override_reason="Eilt")
    assert refused.status_code == 409
    month = date.today().strftime("%Y-%m")
    result = app.test_cli_runner().invoke(args=["releases", "report", "--month", month])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.output)))
    assert [(r["request_id"], r["state"], r["override"]) for r in rows] == [
        (request_id, "cancelled", "no")
    ]
    assert rows[0]["reason"] == "changed since submission"


def test_a_field_set_back_to_its_approved_value_no_longer_waits(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases
):
    record = released(api, alice, carol, releases, beschreibung="B1")
    first = api.patch(record["id"], alice, {"titel": "T2", "beschreibung": "B2"})
    first = first.get_json()["release_request"]
    # The title back: only the description waits, on a request superseding the first.
    back = api.patch(record["id"], alice, {"titel": "Bericht"})
    assert back.status_code == 200
    second = back.get_json()["release_request"]
    assert second["id"] != first["id"]
    assert second["pending"] == {"fields": {"beschreibung": "B2"}, "content": None}
    assert releases.state(first["id"]) == "cancelled"
    # The description back too: nothing waits, and the request says why it ended.
    gone = api.patch(record["id"], alice, {"beschreibung": "B1"})
    assert gone.status_code == 200 and gone.get_json()["release_request"] is None
    shown = api.get(f"/api/release-requests/{second['id']}", carol).get_json()
    assert (shown["state"], shown["reason"]) == ("cancelled", "withdrawn by a change back")
    assert shown["changes"] == {"beschreibung": ["B2", "B1"]}
    assert public_view(api, record["id"])[0]["titel"] == "Bericht"
    assert api.row(record["id"]).version == 1


def test_a_held_change_does_not_silently_supersede_another_users_waiting_change(
    app: Flask, api: Api, alice: Account, carol: Account, admin: Account, releases: Releases
):
    record = released(api, alice, carol, releases)
    etag = api.get(f"/api/files/{record['id']}", alice).headers["ETag"]
    asked = api.client.patch(
        f"/api/files/{record['id']}", json={"titel": "T2"}, headers={**alice.auth, "If-Match": etag}
    )
    asked = asked.get_json()["release_request"]
    waiting = api.objects()
    # The administrator edits with the same tag: the ETag did not move, the request did.
    refused = api.client.patch(
        f"/api/files/{record['id']}", json={"titel": "T3"}, headers={**admin.auth, "If-Match": etag}
    )
    assert refused.status_code == 409
    assert asked["id"] in refused.get_json()["message"]
    replaced = api.replace(admin, record["id"], "v3.pdf", V3, headers={"If-Match": etag})
    assert replaced.status_code == 409
    assert api.objects() == waiting
    shown = api.get(f"/api/release-requests/{asked['id']}", carol).get_json()
    assert (shown["state"], shown["pending"]["fields"]) == ("pending", {"titel": "T2"})
    # Cancelled explicitly first, the change waits on a request of its own.
    assert releases.act(asked["id"], "cancel", admin).status_code == 200
    mine = api.patch(record["id"], admin, {"titel": "T3"}).get_json()["release_request"]
    assert mine["pending"]["fields"] == {"titel": "T3"}
    assert public_view(api, record["id"])[0]["titel"] == "Bericht"
