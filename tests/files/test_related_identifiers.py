"""Links between records (issue 49, point 2): `related_identifiers` with DataCite's relation
types, to another record by id, a DOI or a URL; checked when written; never revealing a
record its reader may not see (docs/links-and-series.md)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.links.test_links import record_link, shared
from tests.support.api import Account, Api

CSV = b"jahr;quote\n2025;5,9\n2026;6,1\n"


def link(target: str, relation: str = "IsSupplementedBy", kind: str = "record") -> dict[str, str]:
    return {"relation_type": relation, "identifier": target, "identifier_type": kind}


def create(api: Api, account: Account, **fields: Any) -> dict[str, Any]:
    sent = {k: json.dumps(v) if isinstance(v, list | dict) else v for k, v in fields.items()}
    return api.create(account, **sent)


def dataset(api: Api, account: Account, **fields: Any) -> dict[str, Any]:
    return create(api, account, name="quote.csv", data=CSV, titel="Quoten", **fields)


def test_links_to_a_record_a_doi_and_a_url_are_stored_in_their_form(api: Api, alice: Account):
    data = dataset(api, alice)
    sent = [
        link(data["id"].upper()),
        link("https://doi.org/10.1234/ABC.5", "References", "DOI"),
        link("https://example.org/studie?id=7", "IsDerivedFrom", "URL"),
    ]
    report = create(api, alice, related_identifiers=sent)
    stored = [
        link(data["id"]),
        link("10.1234/abc.5", "References", "DOI"),
        link("https://example.org/studie?id=7", "IsDerivedFrom", "URL"),
    ]
    assert report["related_identifiers"] == stored
    assert api.get(f"/api/files/{report['id']}", alice).get_json()["related_identifiers"] == stored
    public = api.get(f"/api/public/files/{report['id']}").get_json()
    assert public["related_identifiers"] == stored
    # The same link twice is one link.
    again = api.patch(report["id"], alice, {"related_identifiers": [*stored, stored[1]]})
    assert again.get_json()["related_identifiers"] == stored


@pytest.mark.parametrize(
    ("sent", "key", "reason"),
    [
        (link(str(uuid.uuid4()), "IsFriendOf"), "related_identifiers.0.relation_type", "one of"),
        (link("10.1234/x", kind="ISBN"), "related_identifiers.0.identifier_type", "one of"),
        (link("doi:11.1234/x", kind="DOI"), "related_identifiers.0.identifier", "DOI"),
        (link("ftp://example.org/x", kind="URL"), "related_identifiers.0.identifier", "http"),
        (link("not-a-uuid"), "related_identifiers.0.identifier", "UUID"),
        (link(str(uuid.uuid4())), "related_identifiers.0.identifier", "no record"),
        (
            {"relation_type": "References", "identifier_type": "URL"},
            "related_identifiers.0.identifier",
            "is required",
        ),
    ],
)
def test_a_bad_link_is_422_naming_it_and_stores_nothing(
    api: Api, alice: Account, sent: dict[str, str], key: str, reason: str
):
    response = api.upload(alice, related_identifiers=json.dumps([sent]))
    assert response.status_code == 422
    errors = response.get_json()["errors"]
    assert list(errors) == [key], errors
    assert reason in errors[key][0]
    assert api.rows() == [] and api.objects() == set()


def test_a_link_to_a_record_the_writer_may_not_see_is_refused_like_an_unknown_one(
    api: Api, alice: Account, bob: Account
):
    hidden = dataset(api, bob, freigabe="false")
    public = dataset(api, bob)
    unknown = api.upload(alice, related_identifiers=json.dumps([link(str(uuid.uuid4()))]))
    refused = api.upload(alice, related_identifiers=json.dumps([link(hidden["id"])]))
    assert refused.status_code == unknown.status_code == 422
    assert refused.get_json() == unknown.get_json()
    assert len(api.rows()) == 2
    # Another user's released record may be linked, and its owner's own unreleased one.
    mine = dataset(api, alice, freigabe="false")
    report = create(api, alice, related_identifiers=[link(public["id"]), link(mine["id"])])
    assert [found["identifier"] for found in report["related_identifiers"]] == [
        public["id"],
        mine["id"],
    ]


def test_a_record_cannot_be_linked_to_itself_and_a_bad_patch_changes_nothing(
    api: Api, alice: Account
):
    report = create(api, alice, titel="Bericht")
    response = api.patch(
        report["id"], alice, {"titel": "Neu", "related_identifiers": [link(report["id"])]}
    )
    assert response.status_code == 422
    assert response.get_json()["errors"] == {
        "related_identifiers.0.identifier": ["A record cannot be linked to itself."]
    }
    row = api.row(report["id"])
    assert (row.titel, row.related_identifiers) == ("Bericht", None)


def test_the_public_never_sees_a_link_to_a_record_it_may_not_see(
    api: Api, alice: Account, bob: Account
):
    data = dataset(api, alice)
    report = create(api, alice, related_identifiers=[link(data["id"])])
    assert api.patch(data["id"], alice, {"freigabe": False}).status_code == 200
    public = api.get(f"/api/public/files/{report['id']}").get_json()
    assert public["related_identifiers"] == []
    listed = api.get("/api/public/files").get_json()["data"]
    assert [found["related_identifiers"] for found in listed] == [[]]
    # Its owner still sees what was stated, and a whole-form save keeps it.
    own = api.get(f"/api/files/{report['id']}", alice).get_json()
    assert own["related_identifiers"] == [link(data["id"])]
    saved = api.patch(report["id"], alice, {"related_identifiers": own["related_identifiers"]})
    assert saved.status_code == 200
    # A share link's holder sees what the public sees.
    made = record_link(api, alice, report["id"])
    assert made.status_code == 201, made.get_json()
    assert shared(api, made.get_json()).get_json()["related_identifiers"] == []
    # Released again, the link is back; deleted, it is gone for good.
    api.patch(data["id"], alice, {"freigabe": True})
    public = api.get(f"/api/public/files/{report['id']}").get_json()
    assert public["related_identifiers"] == [link(data["id"])]
    assert api.delete(data["id"], alice).status_code == 204
    assert api.get(f"/api/public/files/{report['id']}").get_json()["related_identifiers"] == []
