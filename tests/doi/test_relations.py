"""What DataCite is sent of who made a record and what it belongs to (issue 49, point 5): the
creators with ORCID, GND and ROR, the links as DOIs (a record without one by its landing
page), the inverse of other records' links, the series; kept in step when another record's
link or release changes. The fake DataCite checks every payload against schema 4.5."""

from __future__ import annotations

import json

from tests.doi.conftest import Dois
from tests.files.test_creators import ERIKA, INSTITUTE, ORCID, ROR
from tests.files.test_editions import edition
from tests.files.test_related_identifiers import dataset, link
from tests.support.api import Account, Api


def related(held: dict) -> list[tuple[str, str, str]]:
    return [
        (r["relationType"], r["relatedIdentifierType"], r["relatedIdentifier"])
        for r in held.get("relatedIdentifiers", [])
    ]


def test_datacite_gets_the_creators_identifiers_and_affiliations(
    api: Api, alice: Account, dois: Dois
):
    record = api.create(alice, titel="Bericht", creators=json.dumps([ERIKA, INSTITUTE]))
    doi = dois.reserved(record["id"], alice)
    dois.work()
    erika, institute = dois.held(doi)["creators"]
    assert erika["nameType"] == "Personal"
    assert (erika["familyName"], erika["givenName"]) == ("Muster", "Erika")
    assert erika["nameIdentifiers"] == [
        {
            "nameIdentifier": f"https://orcid.org/{ORCID}",
            "nameIdentifierScheme": "ORCID",
            "schemeUri": "https://orcid.org",
        },
        {
            "nameIdentifier": "https://d-nb.info/gnd/118540238",
            "nameIdentifierScheme": "GND",
            "schemeUri": "https://d-nb.info/gnd/",
        },
    ]
    assert erika["affiliation"] == [
        {
            "name": "Institut für Beispiele",
            "affiliationIdentifier": f"https://ror.org/{ROR}",
            "affiliationIdentifierScheme": "ROR",
            "schemeUri": "https://ror.org",
        }
    ]
    assert institute == {"name": "Institut für Beispiele", "nameType": "Organizational"}


def test_editions_are_linked_both_ways_at_datacite_by_their_dois(
    api: Api, alice: Account, dois: Dois
):
    data = dataset(api, alice)
    older = api.create(alice, titel="Bericht", related_identifiers=json.dumps([link(data["id"])]))
    old_doi = dois.reserved(older["id"], alice)
    dois.work()
    landing = f"https://files.example.org/records/{data['id']}"
    assert related(dois.held(old_doi)) == [("IsSupplementedBy", "URL", landing)]
    newer = edition(api, alice, older["id"]).get_json()["files"][0]
    dois.work()
    new_doi = newer["doi"]
    assert related(dois.held(new_doi)) == [
        ("IsSupplementedBy", "URL", landing),
        ("IsNewVersionOf", "DOI", old_doi),
    ]
    # The older record was not written, yet its DataCite metadata follows.
    assert related(dois.held(old_doi))[-1] == ("IsPreviousVersionOf", "DOI", new_doi)
    # The newer edition withdrawn: the older one no longer names it.
    assert api.patch(newer["id"], alice, {"freigabe": False}).status_code == 200
    dois.work()
    assert related(dois.held(old_doi)) == [("IsSupplementedBy", "URL", landing)]


def test_the_series_is_a_related_item(api: Api, admin: Account, alice: Account, dois: Dois):
    made = api.client.post("/api/series", json={"slug": "fb", "title": "FB"}, headers=admin.auth)
    assert made.status_code == 201
    record = api.create(alice, series=json.dumps({"slug": "fb", "number": "7/2026"}))
    doi = dois.reserved(record["id"], alice)
    dois.work()
    assert dois.held(doi)["relatedItems"] == [
        {
            "relationType": "IsPartOf",
            "relatedItemType": "Collection",
            "relatedItemIdentifier": {
                "relatedItemIdentifier": "https://files.example.org/series/fb",
                "relatedItemIdentifierType": "URL",
            },
            "titles": [{"title": "FB"}],
            "number": "7/2026",
            "numberType": "Report",
        }
    ]


def test_datacites_publication_year_is_the_pages(api: Api, alice: Account, dois: Dois):
    record = api.create(alice, titel="Bericht", sperrfrist="2099-03-04")
    doi = dois.reserved(record["id"], alice)
    dois.work()
    assert dois.held(doi)["publicationYear"] == "2099"
    page = api.client.get(f"/records/{record['id']}").get_data(as_text=True)
    assert '<meta name="citation_publication_date" content="2099/03/04">' in page
