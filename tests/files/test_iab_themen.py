"""`iab_themen`, the original service's name of `org_themen`: the DataHub client sends it on
create and in every PATCH, and fills its edit form from it. Accepted as an alias with the same
rules; every record answer carries both names with the same value."""

from __future__ import annotations

from typing import Any

from tests.support import samples
from tests.support.api import Account, Api


def test_create_accepts_iab_themen_as_org_themen(api: Api, alice: Account):
    response = api.upload(alice, iab_themen="  Arbeitsmarkt  ")
    assert response.status_code == 201
    [record] = response.get_json()["files"]
    assert record["org_themen"] == record["iab_themen"] == "Arbeitsmarkt"
    assert api.get(f"/api/files/{record['id']}", alice).get_json()["org_themen"] == "Arbeitsmarkt"


def test_patch_accepts_iab_themen_and_null_clears(api: Api, alice: Account):
    record = api.create(alice)
    response = api.patch(record["id"], alice, {"iab_themen": "Bildung"})
    assert response.status_code == 200
    body = response.get_json()
    assert body["org_themen"] == body["iab_themen"] == "Bildung"
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


def test_every_record_answer_carries_iab_themen_as_org_themen(api: Api, alice: Account):
    created = api.create(alice, org_themen="Arbeitsmarkt", titel="Bericht", freigabe="1")
    record_id = created["id"]
    patched = api.patch(record_id, alice, {"org_themen": "Bildung"}).get_json()
    replaced = api.replace(alice, record_id, "neu.pdf", samples.pdf_bytes()).get_json()
    answers: list[tuple[str, dict[str, Any], str]] = [
        ("create", created, "Arbeitsmarkt"),
        ("patch", patched, "Bildung"),
        ("replace", replaced, "Bildung"),
        ("read", api.get(f"/api/files/{record_id}", alice).get_json(), "Bildung"),
        ("public read", api.get(f"/api/public/files/{record_id}").get_json(), "Bildung"),
    ]
    for name, path, query in (
        ("list", "/api/files", {}),
        ("cursor list", "/api/files", {"cursor": ""}),
        ("search", "/api/files", {"q": "Bericht"}),
        ("public list", "/api/public/files", {}),
        ("public search", "/api/public/files", {"q": "Bildung"}),
    ):
        [record] = api.get(path, alice, query_string=query).get_json()["data"]
        answers.append((name, record, "Bildung"))
    for name, answer, themes in answers:
        assert (answer["org_themen"], answer["iab_themen"]) == (themes, themes), name


def client_edit_body(record: dict[str, Any]) -> dict[str, Any]:
    """What the DataHub client (repository-next, `RepositoryApp.tsx`: `openEdit`, then
    `saveEdit`) sends when the user opens a record's edit form and saves it unchanged."""

    def text(name: str) -> str | None:
        return (str(record[name]) if record.get(name) else "").strip() or None

    return {
        "aktiv_id": text("aktiv_id"),
        "reprotyp": text("reprotyp"),
        "titel": text("titel"),
        "beschreibung": text("beschreibung"),
        "autoren": text("autoren"),
        "sachschlagwoerter": text("sachschlagwoerter"),
        "iab_themen": text("iab_themen"),
        "sperrfrist": (record.get("sperrfrist") or "")[:10] or None,
        "reihenfolge": record.get("reihenfolge") or 0,
        "freigabe": record.get("freigabe") not in (False, 0, "0"),
    }


def test_the_clients_unchanged_save_changes_nothing_but_updated_at(api: Api, alice: Account):
    full = api.create(
        alice,
        aktiv_id="AKT-1",
        path="reports/2026",
        reprotyp="Bericht",
        titel="Jahresbericht",
        beschreibung="Zahlen",
        autoren="A; B",
        sachschlagwoerter="Arbeit",
        org_themen="Arbeitsmarkt",
        sperrfrist="2030-01-01",
        reihenfolge="7",
        freigabe="0",
    )
    sparse = api.create(alice, titel="Nur ein Titel")
    for created in (full, sparse):
        before = api.get(f"/api/files/{created['id']}", alice).get_json()
        body = client_edit_body(before)
        assert set(body) >= {"iab_themen", "titel", "sperrfrist", "freigabe"}
        saved = api.patch(created["id"], alice, body)
        assert saved.status_code == 200, saved.get_json()
        after = api.get(f"/api/files/{created['id']}", alice).get_json()
        assert after.pop("updated_at") >= before.pop("updated_at")
        assert after == before
    assert api.get(f"/api/files/{full['id']}", alice).get_json()["org_themen"] == "Arbeitsmarkt"
