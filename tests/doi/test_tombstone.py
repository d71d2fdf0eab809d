"""A withdrawn record's tombstone and DataCite keep what the public last saw (issue 46): a
title set in the write that unreleases, or after it, is never shown in the 410 nor sent to
DataCite; a DOI a page showed before DataCite had it is registered with the tombstone."""

from __future__ import annotations

import json

from tests.doi.conftest import Dois
from tests.doi.test_outage import make_due_now
from tests.support import samples
from tests.support.api import Account, Api

NEVER_PUBLIC = "Nie öffentlich"


def tombstone(api: Api, record_id: str) -> str:
    page = api.client.get(f"/records/{record_id}", headers={"Accept": "text/html"})
    assert page.status_code == 410
    return page.get_data(as_text=True)


def sent_anywhere(dois: Dois, text: str) -> bool:
    """Whether any request DataCite received carried `text`."""
    return any(text in json.dumps(r.body, ensure_ascii=False) for r in dois.datacite.requests)


def released_with_doi(api: Api, alice: Account, dois: Dois) -> tuple[dict, str]:
    record = api.create(alice, titel="Bericht", autoren="Muster, Erika", freigabe="true")
    doi = dois.reserved(record["id"], alice)
    dois.work()
    assert dois.held(doi)["state"] == "findable"
    return record, doi


def test_unreleasing_with_a_new_title_keeps_the_title_the_public_saw(
    api: Api, alice: Account, dois: Dois
):
    record, doi = released_with_doi(api, alice, dois)
    changed = api.patch(record["id"], alice, {"freigabe": False, "titel": NEVER_PUBLIC})
    assert changed.status_code == 200
    dois.work()
    page = tombstone(api, record["id"])
    assert "Bericht" in page and NEVER_PUBLIC not in page
    row = dois.row(doi)
    assert row is not None and row.tombstone_title == "Bericht"
    assert NEVER_PUBLIC not in (row.tombstone_citation or "")
    assert dois.held(doi)["state"] == "registered"
    assert dois.held(doi)["titles"] == [{"title": "Bericht"}]
    assert not sent_anywhere(dois, NEVER_PUBLIC)


def test_a_delete_after_unrelease_and_edit_keeps_the_first_tombstone(
    api: Api, alice: Account, dois: Dois
):
    record, doi = released_with_doi(api, alice, dois)
    assert api.patch(record["id"], alice, {"freigabe": False}).status_code == 200
    assert api.patch(record["id"], alice, {"titel": NEVER_PUBLIC}).status_code == 200
    assert api.delete(record["id"], alice).status_code == 204
    dois.work()
    page = tombstone(api, record["id"])
    assert "Bericht" in page and NEVER_PUBLIC not in page
    row = dois.row(doi)
    assert row is not None
    assert (row.withdrawn_reason, row.tombstone_title) == ("deleted", "Bericht")
    assert not sent_anywhere(dois, NEVER_PUBLIC)


def test_edits_of_a_withdrawn_record_never_reach_datacite(api: Api, alice: Account, dois: Dois):
    record, doi = released_with_doi(api, alice, dois)
    assert api.patch(record["id"], alice, {"freigabe": False}).status_code == 200
    dois.work()
    calls = dois.calls(doi)
    assert calls[-1] == ("update", "hide")
    for change in ({"titel": NEVER_PUBLIC}, {"beschreibung": NEVER_PUBLIC}):
        assert api.patch(record["id"], alice, change).status_code == 200
    assert api.replace(alice, record["id"], "intern.txt", b"intern\n").status_code == 200
    dois.work()
    assert dois.calls(doi) == calls
    assert not sent_anywhere(dois, NEVER_PUBLIC)
    row = dois.row(doi)
    assert row is not None and row.due_at is None
    # Released again, the record is public as it is now: that DataCite gets.
    assert api.patch(record["id"], alice, {"freigabe": True}).status_code == 200
    dois.work()
    assert dois.held(doi)["state"] == "findable"
    assert dois.held(doi)["titles"] == [{"title": NEVER_PUBLIC}]


def test_a_doi_shown_before_datacite_had_it_is_registered_with_its_tombstone(
    api: Api, alice: Account, dois: Dois
):
    dois.datacite.down()
    record = api.create(alice, titel="Bericht", freigabe="true")
    doi = dois.reserved(record["id"], alice)
    page = api.client.get(f"/records/{record['id']}", headers={"Accept": "text/html"})
    assert doi in page.get_data(as_text=True)  # readers saw the DOI
    assert "failed 1" in dois.cli("work").output
    assert api.delete(record["id"], alice).status_code == 204
    assert doi in tombstone(api, record["id"])
    dois.datacite.up()
    make_due_now(api.app)
    assert "Done 1, failed 0" in dois.work()
    held = dois.held(doi)
    assert held["state"] == "registered"
    assert held["titles"] == [{"title": "Bericht"}]
    assert held["url"] == f"https://files.example.org/records/{record['id']}"
    row = dois.row(doi)
    assert row is not None and (row.state, row.due_at, row.last_error) == ("registered", None, None)


def test_a_withdrawn_records_cover_answers_410_with_the_tombstone(
    api: Api, alice: Account, dois: Dois
):
    """Issue 50: the cover's address is a public door of the record like its page."""
    from app.covers import making
    from app.extensions import db

    record = api.create(alice, "bild.png", samples.png_bytes(), titel="Bild", freigabe="true")
    dois.reserved(record["id"], alice)
    with api.app.app_context():
        assert making.make_due().done == 1
        db.session.remove()
    assert api.client.get(f"/records/{record['id']}/cover/200.jpg").status_code == 200
    assert api.patch(record["id"], alice, {"freigabe": False}).status_code == 200
    gone = api.client.get(f"/records/{record['id']}/cover/200.jpg")
    assert gone.status_code == 410
    assert "Bild" in gone.get_data(as_text=True)  # the tombstone, naming what was withdrawn
