"""New editions (issue 49, point 4): a new record, its own id, DOI and citation, linked both
ways with the released record it succeeds (`IsNewVersionOf`, and `IsPreviousVersionOf` shown
by the older one); the older page says a newer edition exists. A replacement stays a new
version under the same id (docs/links-and-series.md, "New editions")."""

from __future__ import annotations

import json
from typing import Any

from lxml import html

from tests.files.test_creators import ERIKA, INSTITUTE
from tests.files.test_related_identifiers import dataset, link
from tests.pages.test_related import related
from tests.support import samples
from tests.support.api import Account, Api, encode_multipart

SECOND = samples.pdf_bytes() + b"\n% 2. Auflage\n"


def edition(
    api: Api,
    account: Account,
    record_id: str,
    files: list[tuple[str, bytes]] | None = None,
    **fields: Any,
) -> Any:
    files = [("bericht-2.pdf", SECOND)] if files is None else files
    parts = [("files[]", name, data, "application/octet-stream") for name, data in files]
    parts += [
        (key, None, (json.dumps(v) if isinstance(v, list | dict) else str(v)).encode(), None)
        for key, v in fields.items()
    ]
    content_type, body = encode_multipart(parts)
    return api.client.post(
        f"/api/files/{record_id}/editions",
        data=body,
        content_type=content_type,
        headers=account.auth,
    )


def test_a_new_edition_is_a_new_record_linked_both_ways(api: Api, admin: Account, alice: Account):
    made = api.client.post("/api/series", json={"slug": "fb", "title": "FB"}, headers=admin.auth)
    assert made.status_code == 201
    data = dataset(api, alice)
    older = api.create(
        alice,
        titel="Arbeitsmarkt 2026",
        creators=json.dumps([ERIKA, INSTITUTE]),
        series=json.dumps({"slug": "fb", "number": "7/2026"}),
        related_identifiers=json.dumps([link(data["id"])]),
        sachschlagwoerter="Arbeit",
        sperrfrist="2020-01-01",
    )
    before = api.row(older["id"])
    response = edition(api, alice, older["id"], titel="Arbeitsmarkt 2026 (2. Auflage)")
    assert response.status_code == 201, response.get_json()
    [newer] = response.get_json()["files"]
    assert newer["id"] != older["id"] and newer["version"] == 1
    assert newer["titel"] == "Arbeitsmarkt 2026 (2. Auflage)"
    assert (newer["creators"], newer["autoren"]) == ([ERIKA, INSTITUTE], older["autoren"])
    assert (newer["series"], newer["sachschlagwoerter"]) == (older["series"], "Arbeit")
    assert newer["sperrfrist"] is None and newer["freigabe"] is True
    assert newer["related_identifiers"] == [
        link(data["id"]),
        link(older["id"], "IsNewVersionOf"),
    ]
    # The older record is not written: its link to the newer one is the inverse.
    after = api.row(older["id"])
    assert (after.updated_at, after.version, after.related_identifiers) == (
        before.updated_at,
        before.version,
        before.related_identifiers,
    )
    page = html.fromstring(api.client.get(f"/records/{older['id']}").get_data())
    [notice] = page.xpath("//p[@class='newer-edition']")
    assert notice.text_content() == "Es gibt eine neuere Ausgabe: Arbeitsmarkt 2026 (2. Auflage)"
    assert notice.find("a").get("href") == f"http://localhost/records/{newer['id']}"
    assert (
        "Neuere Ausgabe",
        [("Arbeitsmarkt 2026 (2. Auflage)", f"http://localhost/records/{newer['id']}")],
    ) in related(api, older["id"])
    assert (
        "Frühere Ausgabe",
        [("Arbeitsmarkt 2026", f"http://localhost/records/{older['id']}")],
    ) in related(api, newer["id"])
    # An edition of the edition: each page names the one after it.
    third = edition(api, alice, newer["id"]).get_json()["files"][0]
    assert third["related_identifiers"][-1] == link(newer["id"], "IsNewVersionOf")
    assert [e["identifier"] for e in third["related_identifiers"]] == [data["id"], newer["id"]]


def test_only_a_released_record_gets_a_new_edition(api: Api, alice: Account, bob: Account):
    hidden = api.create(alice, freigabe="false")
    refused = edition(api, alice, hidden["id"])
    assert refused.status_code == 409
    assert f"/api/files/{hidden['id']}/content" in refused.get_json()["message"]
    shown = api.create(alice)
    assert edition(api, bob, shown["id"]).status_code == 404
    assert len(api.rows()) == 2 and len(api.objects()) == 2


def test_an_administrator_makes_it_for_the_owner(api: Api, admin: Account, alice: Account):
    older = api.create(alice)
    newer = edition(api, admin, older["id"]).get_json()["files"][0]
    assert api.row(newer["id"]).user_id == alice.id
    assert api.get(f"/api/files/{newer['id']}", alice).status_code == 200


def test_bad_input_is_422_and_stores_nothing(api: Api, alice: Account):
    older = api.create(alice)
    two = edition(api, alice, older["id"], [("a.pdf", SECOND), ("b.pdf", SECOND + b"x")])
    assert two.status_code == 422 and list(two.get_json()["errors"]) == ["files"]
    bad = edition(api, alice, older["id"], creators=[{"given_name": "Erika"}])
    assert bad.status_code == 422
    assert list(bad.get_json()["errors"]) == ["creators.0.family_name"]
    none = edition(api, alice, older["id"], [])
    assert none.status_code == 422 and list(none.get_json()["errors"]) == ["files"]
    assert len(api.rows()) == 1 and len(api.objects()) == 1


def test_autoren_sent_alone_renames_the_inherited_creators(api: Api, alice: Account):
    older = api.create(alice, creators=json.dumps([ERIKA, INSTITUTE]))
    newer = edition(api, alice, older["id"], autoren="Muster, Erika; Neu, Hans").get_json()
    assert newer["files"][0]["creators"] == [ERIKA, {"family_name": "Neu", "given_name": "Hans"}]
