"""Reading the trail over HTTP: `GET /api/audit` and `GET /api/files/{id}/history`."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from flask import Flask

from tests.support.api import Account, Api


def test_the_trail_is_for_administrators_only(api: Api, alice: Account, admin: Account) -> None:
    assert api.get("/api/audit").status_code == 401
    response = api.get("/api/audit", alice)
    assert response.status_code == 403
    assert response.get_json() == {"message": "Only administrators may read the audit trail."}
    assert api.get("/api/audit", admin).status_code == 200


def test_newest_first_with_filters(api: Api, alice: Account, bob: Account, admin: Account) -> None:
    mine = api.create(alice, titel="A")["id"]
    theirs = api.create(bob, titel="B")["id"]
    assert api.patch(mine, alice, {"titel": "A2"}).status_code == 200
    assert api.patch(theirs, admin, {"freigabe": False}).status_code == 200

    page = api.get("/api/audit", admin).get_json()
    seqs = [entry["seq"] for entry in page["data"]]
    assert seqs == sorted(seqs, reverse=True)
    assert page["data"][0]["action"] == "file.update"
    assert page["data"][0]["actor"] == "admin@example.org"
    assert page["data"][0]["changes"] == {"freigabe": [True, False]}
    assert page["next_cursor"] is None and page["next_page_url"] is None

    by_record = api.get(f"/api/audit?record_id={mine}", admin).get_json()["data"]
    assert [e["action"] for e in by_record] == ["file.update", "file.create"]
    by_actor = api.get("/api/audit?actor=ADMIN@example.org", admin).get_json()["data"]
    assert {e["actor"] for e in by_actor} == {"admin@example.org"}
    assert [e["record_id"] for e in by_actor if e["action"] == "file.update"] == [theirs]
    by_action = api.get("/api/audit?action=file.create", admin).get_json()["data"]
    assert {e["record_id"] for e in by_action} == {mine, theirs}
    later = page["data"][0]["at"]
    assert api.get(f"/api/audit?since={later}", admin).get_json()["data"][0]["at"] == later
    assert all(
        e["at"] < later for e in api.get(f"/api/audit?until={later}", admin).get_json()["data"]
    )


def test_pages_of_one_hundred_follow_the_cursor(
    api: Api, alice: Account, admin: Account, app: Flask
) -> None:
    rid = api.create(alice)["id"]
    for n in range(120):
        assert api.patch(rid, alice, {"reihenfolge": n + 1}).status_code == 200
    first = api.get(f"/api/audit?record_id={rid}&cursor=", admin).get_json()
    assert len(first["data"]) == 100 and first["per_page"] == 100
    assert first["next_cursor"]
    link = urlsplit(first["next_page_url"])
    assert parse_qs(link.query) == {"record_id": [rid], "cursor": [first["next_cursor"]]}
    second = api.get(f"{link.path}?{link.query}", admin)
    assert second.status_code == 200
    rest = second.get_json()
    assert len(rest["data"]) == 21 and rest["next_cursor"] is None
    seqs = [e["seq"] for e in first["data"] + rest["data"]]
    assert seqs == sorted(seqs, reverse=True) and len(set(seqs)) == 121
    assert rest["data"][-1]["action"] == "file.create"


def test_bad_filters_are_422(api: Api, admin: Account) -> None:
    for query, field in (
        ("record_id=nope", "record_id"),
        ("since=gestern", "since"),
        ("cursor=-3", "cursor"),
    ):
        response = api.get(f"/api/audit?{query}", admin)
        assert response.status_code == 422, query
        assert field in response.get_json()["errors"]


def test_a_records_history_for_its_owner_and_administrators(
    api: Api, alice: Account, bob: Account, admin: Account
) -> None:
    rid = api.create(alice, titel="Bericht")["id"]
    assert api.patch(rid, admin, {"sperrfrist": "2026-12-01"}).status_code == 200
    history: dict[str, Any] = api.get(f"/api/files/{rid}/history", alice).get_json()
    assert [e["action"] for e in history["data"]] == ["file.create", "file.update"]
    assert history["data"][1]["changes"] == {"sperrfrist": [None, "2026-12-01"]}
    assert history["data"][1]["actor"] == "admin@example.org"
    assert api.get(f"/api/files/{rid}/history", admin).get_json() == history
    assert api.get(f"/api/files/{rid}/history", bob).status_code == 404
    assert api.get(f"/api/files/{rid}/history").status_code == 401

    # Deleted: the record's history is gone with it, the trail keeps it for administrators.
    assert api.delete(rid, alice).status_code == 204
    assert api.get(f"/api/files/{rid}/history", admin).status_code == 404
    kept = api.get(f"/api/audit?record_id={rid}", admin).get_json()["data"]
    assert [e["action"] for e in kept] == ["file.delete", "file.update", "file.create"]
