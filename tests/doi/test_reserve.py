"""Reserving a DOI (POST /api/files/{id}/doi) and releasing it (DELETE), issue 40."""

from __future__ import annotations

import re

from app.doi.services import new_suffix, suffix_valid
from tests.doi.conftest import PREFIX, Dois
from tests.support.api import Account, Api


def test_reserve_answers_a_random_doi_and_the_draft_reaches_datacite(
    api: Api, alice: Account, dois: Dois
):
    record = api.create(alice, titel="Bericht", freigabe="false")
    response = dois.reserve(record["id"], alice)
    assert response.status_code == 201
    body = response.get_json()
    assert body["doi_state"] == "draft"
    prefix, suffix = body["doi"].split("/")
    assert prefix == PREFIX
    assert re.fullmatch(r"[0-9a-z*~$=]{4}-[0-9a-z*~$=]{4}", suffix) and suffix_valid(suffix)
    # Nothing was sent inside the request: the outbox sends it.
    assert dois.datacite.requests == []
    dois.work()
    assert dois.held(body["doi"])["state"] == "draft"
    assert dois.held(body["doi"])["url"].endswith(f"/records/{record['id']}")
    row = dois.row(body["doi"])
    assert row is not None and row.state == "draft" and row.due_at is None
    got = api.get(f"/api/files/{record['id']}", alice).get_json()
    assert (got["doi"], got["doi_state"]) == (body["doi"], "draft")


def test_two_reservations_get_different_suffixes(api: Api, alice: Account, dois: Dois):
    first = dois.reserved(api.create(alice)["id"], alice)
    second = dois.reserved(api.create(alice)["id"], alice)
    assert first != second


def test_a_second_reservation_is_409_naming_the_doi(api: Api, alice: Account, dois: Dois):
    record = api.create(alice)
    doi = dois.reserved(record["id"], alice)
    response = dois.reserve(record["id"], alice)
    assert response.status_code == 409
    assert doi in response.get_json()["message"]


def test_others_get_404_an_administrator_may_reserve(
    api: Api, alice: Account, bob: Account, admin: Account, dois: Dois
):
    record = api.create(alice, freigabe="true")
    assert dois.reserve(record["id"], bob).status_code == 404
    assert dois.release(record["id"], bob).status_code == 404
    assert dois.row_of(record["id"]) is None
    assert dois.reserve(record["id"], admin).status_code == 201


def test_release_of_a_draft_deletes_it_at_datacite_and_the_row(
    api: Api, alice: Account, dois: Dois
):
    record = api.create(alice, freigabe="false")
    doi = dois.reserved(record["id"], alice)
    dois.work()
    assert doi in dois.datacite.dois
    response = dois.release(record["id"], alice)
    assert response.status_code == 204
    got = api.get(f"/api/files/{record['id']}", alice).get_json()
    assert got["doi"] is None and got["doi_state"] is None
    dois.work()
    assert doi not in dois.datacite.dois
    assert dois.row(doi) is None
    # The record may get a new one then.
    assert dois.reserved(record["id"], alice) != doi


def test_release_of_a_reservation_datacite_never_saw_sends_nothing(
    api: Api, alice: Account, dois: Dois
):
    record = api.create(alice, freigabe="false")
    doi = dois.reserved(record["id"], alice)
    assert dois.release(record["id"], alice).status_code == 204
    dois.work()
    assert dois.datacite.requests == [] and dois.row(doi) is None


def test_release_once_registered_is_409(api: Api, alice: Account, dois: Dois):
    record = api.create(alice, freigabe="true")
    doi = dois.reserved(record["id"], alice)
    dois.work()
    response = dois.release(record["id"], alice)
    assert response.status_code == 409
    assert doi in response.get_json()["message"]
    assert dois.held(doi)["state"] == "findable"


def test_release_without_a_doi_is_404(api: Api, alice: Account, dois: Dois):
    record = api.create(alice)
    assert dois.release(record["id"], alice).status_code == 404


def test_record_answers_carry_the_doi(api: Api, alice: Account, dois: Dois):
    record = api.create(alice, titel="A", freigabe="false")
    other = api.create(alice, titel="B")
    doi = dois.reserved(record["id"], alice)
    listed = {r["id"]: r for r in api.get("/api/files", alice).get_json()["data"]}
    assert (listed[record["id"]]["doi"], listed[record["id"]]["doi_state"]) == (doi, "draft")
    assert (listed[other["id"]]["doi"], listed[other["id"]]["doi_state"]) == (None, None)
    patched = api.patch(record["id"], alice, {"titel": "A2"}).get_json()
    assert patched["doi"] == doi
    replaced = api.replace(alice, record["id"], "new.txt", b"version 2\n")
    assert replaced.status_code == 200 and replaced.get_json()["doi"] == doi
    created = api.upload(alice, titel="C").get_json()["files"][0]
    assert created["doi"] is None and created["doi_state"] is None


def test_reserve_and_release_are_in_the_audit_trail(
    api: Api, alice: Account, admin: Account, dois: Dois
):
    record = api.create(alice, freigabe="false")
    doi = dois.reserved(record["id"], alice)
    assert dois.release(record["id"], alice).status_code == 204
    dois.work()  # the worker's own bookkeeping leaves no entry
    entries = api.get("/api/audit", admin, query_string={"record_id": record["id"]}).get_json()[
        "data"
    ]
    found = [(e["action"], e["actor"], e["changes"]) for e in reversed(entries)]
    assert found[1:] == [
        ("doi.reserve", alice.email, {"doi": doi}),
        ("doi.release", alice.email, {"doi": doi}),
    ]


def test_the_check_character_catches_a_mistyped_suffix():
    suffix = new_suffix()
    assert suffix_valid(suffix)
    first = suffix[0]
    typo = ("1" if first != "1" else "2") + suffix[1:]
    assert not suffix_valid(typo)
    swapped = suffix[1] + suffix[0] + suffix[2:]
    assert suffix[0] == suffix[1] or not suffix_valid(swapped)
