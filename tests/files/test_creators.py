"""Structured creators (issue 49, point 1): persons and organisations with ORCID, GND and
affiliations with ROR, checked on every door; `autoren` kept in step, so the DataHub client,
which knows only `autoren` and sends its whole form back on every save, loses nothing
(docs/contract.md, "Authors: autoren and creators")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.api import Account, Api

#: ORCID's own example iD (a valid check character) and one digit off.
ORCID = "0000-0002-1825-0097"
ORCID_MISTYPED = "0000-0002-1825-0098"
ROR = "05gq02987"  # Brown University: a real ROR id
ERIKA = {
    "family_name": "Muster",
    "given_name": "Erika",
    "orcid": ORCID,
    "gnd": "118540238",
    "affiliations": [{"name": "Institut für Beispiele", "ror": ROR}],
}
INSTITUTE = {"name": "Institut für Beispiele"}


def create(api: Api, account: Account, **fields: Any) -> dict[str, Any]:
    """An upload with the structured fields sent as multipart sends them: JSON text."""
    sent = {k: json.dumps(v) if isinstance(v, list | dict) else v for k, v in fields.items()}
    return api.create(account, **sent)


def test_creators_are_stored_and_autoren_is_their_names(api: Api, alice: Account):
    sent = {**ERIKA, "orcid": f"https://orcid.org/{ORCID}", "gnd": " 118540238 "}
    record = create(api, alice, creators=[sent, INSTITUTE])
    assert record["creators"] == [ERIKA, INSTITUTE]
    assert record["autoren"] == "Muster, Erika; Institut für Beispiele"
    read = api.get(f"/api/files/{record['id']}", alice).get_json()
    assert read["creators"] == [ERIKA, INSTITUTE] and read["autoren"] == record["autoren"]
    public = api.get(f"/api/public/files/{record['id']}").get_json()
    assert public["creators"] == [ERIKA, INSTITUTE]


def test_a_record_with_autoren_only_has_no_structured_creators(api: Api, alice: Account):
    record = api.create(alice, autoren="Muster, Erika; Beispiel, Max")
    assert record["creators"] is None and record["autoren"] == "Muster, Erika; Beispiel, Max"
    assert api.row(record["id"]).creators is None


@pytest.mark.parametrize(
    ("creator", "key", "reason"),
    [
        ({**ERIKA, "orcid": ORCID_MISTYPED}, "creators.0.orcid", "check character"),
        ({**ERIKA, "orcid": "0000-0002-1825"}, "creators.0.orcid", "four groups"),
        ({**ERIKA, "gnd": "GND-123"}, "creators.0.gnd", "GND id"),
        (
            {**ERIKA, "affiliations": [{"name": "X", "ror": "05gq02988"}]},
            "creators.0.affiliations.0.ror",
            "check digits",
        ),
        (
            {**ERIKA, "affiliations": [{"name": "X", "ror": "https://ror.org/5gq02987"}]},
            "creators.0.affiliations.0.ror",
            "ROR id",
        ),
        ({**ERIKA, "affiliations": [{"ror": ROR}]}, "creators.0.affiliations.0.name", "required"),
        ({"given_name": "Erika"}, "creators.0.family_name", "required"),
        ({"name": "Institut", "family_name": "Muster"}, "creators.0.name", "not both"),
        ({"name": "Institut", "orcid": ORCID}, "creators.0.orcid", "names a person"),
        ({"family_name": "Muster; Beispiel"}, "creators.0.family_name", "';'"),
        ({**ERIKA, "email": "erika@example.org"}, "creators.0.email", "Unknown field"),
        ("Muster, Erika", "creators.0", "JSON object"),
    ],
)
def test_a_bad_creator_is_422_naming_the_field_and_stores_nothing(
    api: Api, alice: Account, creator: Any, key: str, reason: str
):
    response = api.upload(alice, creators=json.dumps([creator]))
    assert response.status_code == 422
    errors = response.get_json()["errors"]
    assert list(errors) == [key], errors
    assert reason in errors[key][0]
    assert api.rows() == [] and api.objects() == set()


def test_a_bad_creator_in_a_patch_is_422_and_changes_nothing(api: Api, alice: Account):
    record = create(api, alice, creators=[ERIKA])
    bad = [{**ERIKA, "orcid": ORCID_MISTYPED}]
    response = api.patch(record["id"], alice, {"creators": bad, "titel": "Neu"})
    assert response.status_code == 422
    assert list(response.get_json()["errors"]) == ["creators.0.orcid"]
    row = api.row(record["id"])
    assert json.loads(row.creators) == [ERIKA] and row.titel is None


def test_creators_that_are_not_json_or_too_many_are_422(api: Api, alice: Account):
    for sent, reason in [
        ("[{", "must be JSON"),
        ('{"family_name": "Muster"}', "must be a JSON list"),
        (json.dumps([{"family_name": f"N{i}"} for i in range(101)]), "more than 100"),
    ]:
        response = api.upload(alice, creators=sent)
        assert response.status_code == 422
        assert reason in response.get_json()["errors"]["creators"][0]


def test_names_longer_than_autoren_holds_are_422_on_creators(api: Api, alice: Account):
    many = [{"family_name": "Mustermann-Beispielhaft", "given_name": "Erika"}] * 12
    response = api.upload(alice, creators=json.dumps(many))
    assert response.status_code == 422
    assert "at most 255" in response.get_json()["errors"]["creators"][0]


def test_autoren_sent_with_creators_must_name_them(api: Api, alice: Account):
    agreeing = create(
        api, alice, creators=[ERIKA, INSTITUTE], autoren="Muster, Erika;Institut für Beispiele"
    )
    assert agreeing["autoren"] == "Muster, Erika;Institut für Beispiele"
    response = api.upload(alice, creators=json.dumps([ERIKA]), autoren="Beispiel, Max")
    assert response.status_code == 422
    assert list(response.get_json()["errors"]) == ["autoren"]
    assert "Muster, Erika" in response.get_json()["errors"]["autoren"][0]


def test_a_patch_of_creators_answers_both_forms(api: Api, alice: Account):
    record = api.create(alice, autoren="Alt, Anna")
    response = api.patch(record["id"], alice, {"creators": [INSTITUTE, ERIKA]})
    assert response.status_code == 200
    body = response.get_json()
    assert body["creators"] == [INSTITUTE, ERIKA]
    assert body["autoren"] == "Institut für Beispiele; Muster, Erika"


def test_the_datahub_client_saving_its_whole_form_keeps_the_identifiers(api: Api, alice: Account):
    """It reads a record, shows `autoren` and sends every field it knows back: unchanged
    names keep everything; a name removed takes its creator along; a new name is a new
    creator; a renamed one loses what the old name had (it is another person)."""
    record = create(api, alice, creators=[ERIKA, INSTITUTE], titel="Bericht")
    form = api.get(f"/api/files/{record['id']}", alice).get_json()
    whole = {name: form[name] for name in ("titel", "autoren", "beschreibung", "iab_themen")}
    assert api.patch(record["id"], alice, {**whole, "titel": "Bericht 2"}).status_code == 200
    assert api.get(f"/api/files/{record['id']}", alice).get_json()["creators"] == [
        ERIKA,
        INSTITUTE,
    ]
    edited = {**whole, "autoren": "Neu, Hans;  Muster, Erika "}
    body = api.patch(record["id"], alice, edited).get_json()
    expected = [{"family_name": "Neu", "given_name": "Hans"}, ERIKA]
    assert body["creators"] == expected and body["autoren"] == "Neu, Hans;  Muster, Erika"
    assert api.get(f"/api/public/files/{record['id']}").get_json()["creators"] == expected
    assert api.patch(record["id"], alice, {"autoren": None}).get_json()["creators"] is None


def test_empty_creators_remove_every_author_null_keeps_the_text(api: Api, alice: Account):
    record = create(api, alice, creators=[ERIKA])
    body = api.patch(record["id"], alice, {"creators": None}).get_json()
    assert body["creators"] is None and body["autoren"] == "Muster, Erika"
    api.patch(record["id"], alice, {"creators": [ERIKA]})
    body = api.patch(record["id"], alice, {"creators": []}).get_json()
    assert body["creators"] is None and body["autoren"] is None


def test_the_import_manifest_carries_creators(api: Api, app, alice: Account, tmp_path):
    folder = tmp_path / "collection"
    folder.mkdir()
    (folder / "a.csv").write_text("jahr;quote\n2025;5,9\n")
    (folder / "b.csv").write_text("jahr;quote\n2026;6,1\n")
    manifest = tmp_path / "manifest.csv"
    good = json.dumps([ERIKA]).replace('"', '""')
    bad = json.dumps([{**ERIKA, "orcid": ORCID_MISTYPED}]).replace('"', '""')
    manifest.write_text(f'file,titel,creators\na.csv,A,"{good}"\nb.csv,B,"{bad}"\n')
    result = app.test_cli_runner().invoke(
        args=["import", str(folder), "--owner", alice.email, "--metadata", str(manifest)]
    )
    assert "creators.0.orcid" in result.output
    [row] = api.rows()
    assert row.titel == "A" and json.loads(row.creators) == [ERIKA]
    assert row.autoren == "Muster, Erika"
    # A series and links, as JSON text; what they name must exist for the owner.
    (folder / "c.csv").write_text("jahr;quote\n2027;6,3\n")
    (folder / "d.csv").write_text("jahr;quote\n2028;6,4\n")
    link = json.dumps(
        [{"relation_type": "References", "identifier": str(row.id), "identifier_type": "record"}]
    )
    series = json.dumps({"slug": "keine"}).replace('"', '""')
    manifest.write_text(
        f'file,related_identifiers,series\nc.csv,"{link.replace(chr(34), chr(34) * 2)}",\n'
        f'd.csv,,"{series}"\n'
    )
    result = app.test_cli_runner().invoke(
        args=["import", str(folder), "--owner", alice.email, "--metadata", str(manifest)]
    )
    assert "series.slug: There is no series keine" in result.output
    linked = [r for r in api.rows() if r.related_identifiers]
    assert [json.loads(r.related_identifiers)[0]["identifier"] for r in linked] == [str(row.id)]
    # b.csv, no longer listed, comes without metadata; d.csv is rejected.
    assert len(api.rows()) == 3 and len(api.objects()) == 3
