"""A new edition of a record with a DOI gets a DOI of its own (issue 49, point 4): it is
another work to cite; a replacement keeps the record's DOI (tests/doi/test_follow.py)."""

from __future__ import annotations

from tests.doi.conftest import Dois
from tests.files.test_editions import edition
from tests.support.api import Account, Api


def test_a_new_edition_of_a_record_with_a_doi_gets_its_own(api: Api, alice: Account, dois: Dois):
    older = api.create(alice, titel="Bericht")
    doi = dois.reserved(older["id"], alice)
    response = edition(api, alice, older["id"])
    assert response.status_code == 201
    [newer] = response.get_json()["files"]
    assert newer["doi"] not in (None, doi) and newer["doi_state"] == "findable"
    assert dois.row_of(newer["id"]).doi == newer["doi"]
    # Without a DOI the new edition has none either.
    plain = api.create(alice)
    assert edition(api, alice, plain["id"]).get_json()["files"][0]["doi"] is None
