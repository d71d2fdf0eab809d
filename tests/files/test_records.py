"""Reading and updating single records, and who may do it."""

from __future__ import annotations

import pytest

from tests.support.api import RECORD_FIELDS, Account, Api, parse_timestamp

MISSING = "00000000-0000-4000-8000-000000000000"


def test_read_returns_the_full_record(api: Api, alice: Account):
    created = api.create(alice, titel="T", sperrfrist="2030-05-01")
    response = api.get(f"/api/files/{created['id']}", alice)
    assert response.status_code == 200
    record = response.get_json()
    assert list(record) == RECORD_FIELDS
    assert {k: record[k] for k in created} == created
    assert record["updated_at"] == record["created_at"]


@pytest.mark.parametrize("path", [MISSING, "not-a-uuid", "123", MISSING.upper() + "0"])
def test_unknown_or_malformed_ids_are_404(api: Api, alice: Account, path: str):
    for suffix in ("", "/download"):
        response = api.get(f"/api/files/{path}{suffix}", alice)
        assert response.status_code == 404
        assert response.get_json() == {"message": "Not found."}
    assert api.patch(path, alice, {"titel": "x"}).status_code == 404
    assert api.delete(path, alice).status_code == 404


def test_token_ids_are_other_accounts_user_ids(alice: Account, bob: Account, admin: Account):
    """What the per-record tests below rely on (tests/support/api.py, `renumber_token`): a
    check that takes the token id for the user id meets another account's records."""
    assert bob.token_id == alice.id != alice.token_id
    assert admin.token_id == bob.id != admin.id


def test_other_users_records_are_404_for_every_operation(api: Api, alice: Account, bob: Account):
    record = api.create(alice, freigabe="true")
    rid = record["id"]
    assert bob.token_id == alice.id  # a check of bob's token id instead of his user id fails
    assert api.get("/api/files", bob).get_json()["data"] == []
    assert api.get("/api/files", bob, query_string={"cursor": ""}).get_json()["data"] == []
    assert [r["id"] for r in api.get("/api/files", alice).get_json()["data"]] == [rid]
    assert api.get(f"/api/files/{rid}", bob).status_code == 404
    assert api.get(f"/api/files/{rid}/download", bob).status_code == 404
    assert api.patch(rid, bob, {"titel": "x"}).status_code == 404
    assert api.replace(bob, rid, "x.txt", b"hello\n").status_code == 404
    assert api.delete(rid, bob).status_code == 404
    row = api.row(rid)
    assert row is not None and row.titel is None and row.original_name == "report.pdf"
    assert len(api.objects()) == 1


def test_admin_reads_and_updates_any_record(api: Api, alice: Account, admin: Account):
    record = api.create(alice, freigabe="false")
    assert api.get(f"/api/files/{record['id']}", admin).status_code == 200
    response = api.patch(record["id"], admin, {"titel": "vom Admin"})
    assert response.status_code == 200
    assert api.row(record["id"]).titel == "vom Admin"
    assert api.row(record["id"]).user_id == alice.id


def test_changes_reach_the_record_named_and_no_other(api: Api, alice: Account):
    """With several records of one owner, PATCH and DELETE act on the one in the URL."""
    records = [api.create(alice, titel=titel) for titel in ("Eins", "Zwei", "Drei")]
    for record in reversed(records):
        response = api.patch(record["id"], alice, {"titel": f"neu {record['id']}"})
        assert response.status_code == 200 and response.get_json()["id"] == record["id"]
    titles = {r["id"]: api.get(f"/api/files/{r['id']}", alice).get_json()["titel"] for r in records}
    assert titles == {r["id"]: f"neu {r['id']}" for r in records}
    assert api.delete(records[1]["id"], alice).status_code == 204
    assert [api.row(r["id"]) is not None for r in records] == [True, False, True]


def test_patch_changes_only_the_supplied_fields(api: Api, alice: Account):
    record = api.create(alice, titel="alt", autoren="A", reihenfolge="3")
    response = api.patch(
        record["id"], alice, {"titel": " neu ", "freigabe": "0", "sperrfrist": "2031-12-31"}
    )
    assert response.status_code == 200
    body = response.get_json()
    assert list(body) == ["id", "titel", "freigabe", "sperrfrist", "updated_at"]
    assert body["id"] == record["id"]
    assert (body["titel"], body["freigabe"], body["sperrfrist"]) == ("neu", False, "2031-12-31")
    assert parse_timestamp(body["updated_at"]) > parse_timestamp(record["created_at"])

    full = api.get(f"/api/files/{record['id']}", alice).get_json()
    assert full["autoren"] == "A" and full["reihenfolge"] == 3
    assert full["created_at"] == record["created_at"]
    assert full["updated_at"] == body["updated_at"]


def test_patch_null_clears_a_nullable_field(api: Api, alice: Account):
    record = api.create(alice, titel="weg", sperrfrist="2030-01-01", path="a/b")
    response = api.patch(record["id"], alice, {"titel": None, "sperrfrist": None, "path": None})
    assert response.status_code == 200
    row = api.row(record["id"])
    assert (row.titel, row.sperrfrist, row.path) == (None, None, None)


def test_patch_accepts_every_metadata_field(api: Api, alice: Account):
    record = api.create(alice)
    body = {
        "path": "x/y",
        "aktiv_id": "A",
        "reprotyp": "R",
        "titel": "T",
        "beschreibung": "B" * 5000,
        "autoren": "Au",
        "sachschlagwoerter": "S",
        "org_themen": "O",
        "sperrfrist": "2029-01-01",
        "reihenfolge": 7,
        "freigabe": True,
        "erstellt_von": "E",
        "freigegeben_von": "F",
    }
    response = api.patch(record["id"], alice, body)
    assert response.status_code == 200
    assert {k: response.get_json()[k] for k in body} == body


@pytest.mark.parametrize(
    "body,key",
    [
        ({"id": "x"}, "id"),
        ({"size": 1}, "size"),
        ({"mime_type": "text/html"}, "mime_type"),
        ({"original_name": "x.exe"}, "original_name"),
        ({"created_at": "2020-01-01T00:00:00.000000Z"}, "created_at"),
        ({"updated_at": "2020-01-01T00:00:00.000000Z"}, "updated_at"),
        ({"user_id": 2}, "user_id"),
        ({"stored_path": "x"}, "stored_path"),
        ({"titel": "ok", "nonsense": 1}, "nonsense"),
        ({"freigabe": None}, "freigabe"),
        ({"reihenfolge": None}, "reihenfolge"),
        ({"freigabe": "yes"}, "freigabe"),
        ({"freigabe": 2}, "freigabe"),
        ({"reihenfolge": 1.5}, "reihenfolge"),
        ({"reihenfolge": True}, "reihenfolge"),
        ({"reihenfolge": 2**31}, "reihenfolge"),
        ({"titel": 5}, "titel"),
        ({"titel": "x" * 256}, "titel"),
        ({"beschreibung": "x" * 5001}, "beschreibung"),
        ({"path": "../etc"}, "path"),
        ({"sperrfrist": "2026-02-30"}, "sperrfrist"),
        ({"sperrfrist": 20260101}, "sperrfrist"),
        ({}, "body"),
    ],
)
def test_invalid_patch_is_422_and_changes_nothing(api: Api, alice: Account, body, key):
    record = api.create(alice, titel="alt")
    response = api.patch(record["id"], alice, body)
    assert response.status_code == 422
    assert key in response.get_json()["errors"]
    row = api.row(record["id"])
    assert row.titel == "alt"
    assert row.updated_at == parse_timestamp(record["created_at"])


@pytest.mark.parametrize("raw", ["[1, 2]", '"text"', "null", "{broken"])
def test_patch_body_must_be_a_json_object(api: Api, alice: Account, raw: str):
    record = api.create(alice)
    response = api.client.patch(
        f"/api/files/{record['id']}",
        data=raw,
        headers={**alice.auth, "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert list(response.get_json()["errors"]) == ["body"]


def test_patch_body_over_one_mebibyte_is_413(api: Api, alice: Account):
    record = api.create(alice)
    raw = '{"titel": "' + "x" * (1024 * 1024) + '"}'
    response = api.client.patch(
        f"/api/files/{record['id']}",
        data=raw,
        headers={**alice.auth, "Content-Type": "application/json"},
    )
    assert response.status_code == 413
    assert "message" in response.get_json()


def test_method_not_allowed_is_json(api: Api, alice: Account):
    response = api.client.put("/api/files", headers=alice.auth)
    assert response.status_code == 405
    assert response.get_json() == {"message": "Method not allowed."}
    assert "GET" in response.headers["Allow"]


def test_unknown_route_is_json_404(api: Api):
    response = api.client.get("/api/nothing-here")
    assert response.status_code == 404
    assert response.get_json() == {"message": "Not found."}
