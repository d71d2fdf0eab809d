"""The public API of a record that had a DOI (issue 40): once the record left public view its
DOI stays published, so its addresses answer 410, never the 404 of an id that never was."""

from __future__ import annotations

from typing import Any

from tests.pages.test_dois import DATACITE, DOI, WITHDRAWN_AT, give_doi
from tests.support.api import Account, Api


def answers(api: Api, record_id: str) -> list[tuple[int, Any]]:
    return [
        (response.status_code, response.get_json())
        for response in (
            api.client.get(f"/api/public/files/{record_id}"),
            api.client.get(f"/api/public/files/{record_id}/download"),
            api.client.get(f"/api/public/files/{record_id}/versions/1/download"),
        )
    ]


def test_a_withdrawn_record_with_a_doi_is_gone_not_missing(api: Api, alice: Account, app: Any):
    deleted = api.create(alice, "weg.pdf")
    unreleased = api.create(alice, "zurueck.pdf")
    reserved = api.create(alice, "vorab.pdf", freigabe="false")
    assert api.delete(deleted["id"], alice).status_code == 204
    api.set_columns(unreleased["id"], freigabe=False)
    withdrawn = {"withdrawn_at": WITHDRAWN_AT, "wanted": "registered"}
    give_doi(api, deleted["id"], DOI, withdrawn_reason="deleted", **withdrawn)
    give_doi(
        api, unreleased["id"], "10.5072/fr-back-0001", withdrawn_reason="unreleased", **withdrawn
    )
    give_doi(api, reserved["id"], "10.5072/fr-resv-0002", state=None, wanted="draft")
    not_found = [(404, {"message": "Not found."})] * 3
    # DOIs off: every one of them is the plain 404.
    for record in (deleted, unreleased, reserved):
        assert answers(api, record["id"]) == not_found
    app.config.update(DATACITE)
    gone = {"message": f"Gone: this record was withdrawn; its DOI {DOI} stays."}
    assert answers(api, deleted["id"]) == [(410, gone)] * 3
    (status, body), *_ = answers(api, unreleased["id"])
    assert status == 410 and "10.5072/fr-back-0001" in body["message"]
    # Not public yet: the API says nothing of it (the landing page names the reserved DOI).
    assert answers(api, reserved["id"]) == not_found
    # Released again, it is the record again.
    api.set_columns(unreleased["id"], freigabe=True)
    assert api.client.get(f"/api/public/files/{unreleased['id']}").status_code == 200
