"""`iab_themen`, the original service's name of `org_themen`: the DataHub client sends it on
create and in every PATCH. Accepted as an alias with the same rules; answers say org_themen."""

from __future__ import annotations

from tests.support.api import Account, Api


def test_create_accepts_iab_themen_as_org_themen(api: Api, alice: Account):
    response = api.upload(alice, iab_themen="  Arbeitsmarkt  ")
    assert response.status_code == 201
    [record] = response.get_json()["files"]
    assert record["org_themen"] == "Arbeitsmarkt"
    assert "iab_themen" not in record
    assert api.get(f"/api/files/{record['id']}", alice).get_json()["org_themen"] == "Arbeitsmarkt"


def test_patch_accepts_iab_themen_and_null_clears(api: Api, alice: Account):
    record = api.create(alice)
    response = api.patch(record["id"], alice, {"iab_themen": "Bildung"})
    assert response.status_code == 200
    body = response.get_json()
    assert body["org_themen"] == "Bildung" and "iab_themen" not in body
    assert api.patch(record["id"], alice, {"iab_themen": None}).status_code == 200
    assert api.get(f"/api/files/{record['id']}", alice).get_json()["org_themen"] is None


def test_both_names_agreeing_are_accepted(api: Api, alice: Account):
    record = api.create(alice)
    response = api.patch(record["id"], alice, {"iab_themen": "Bildung", "org_themen": " Bildung"})
    assert response.status_code == 200
    assert response.get_json()["org_themen"] == "Bildung"


def test_both_names_differing_are_422_on_iab_themen_and_change_nothing(api: Api, alice: Account):
    record = api.create(alice)
    patched = api.patch(record["id"], alice, {"iab_themen": "A", "org_themen": "B"})
    assert patched.status_code == 422
    assert patched.get_json()["errors"] == {
        "iab_themen": ["The iab_themen field must equal org_themen when both are given."]
    }
    created = api.upload(alice, iab_themen="A", org_themen="B")
    assert created.status_code == 422
    assert list(created.get_json()["errors"]) == ["iab_themen"]
    assert len(api.rows()) == 1
    assert api.get(f"/api/files/{record['id']}", alice).get_json()["org_themen"] is None


def test_iab_themen_follows_the_rules_of_org_themen(api: Api, alice: Account):
    record = api.create(alice)
    response = api.patch(record["id"], alice, {"iab_themen": "x" * 256})
    assert response.status_code == 422
    assert list(response.get_json()["errors"]) == ["iab_themen"]
