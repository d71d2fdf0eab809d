"""DataCite follows the record (issue 40): registered findable when public, updated only when
the payload changed, hidden when the record leaves public view, findable again on release."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest

from tests.doi.conftest import Dois
from tests.support.api import Account, Api


def sent(dois: Dois, doi: str) -> list[tuple[str, str | None]]:
    return dois.calls(doi)


def test_release_registers_the_doi_findable(api: Api, alice: Account, dois: Dois):
    record = api.create(alice, titel="Bericht", freigabe="false")
    doi = dois.reserved(record["id"], alice)
    dois.work()
    assert api.patch(record["id"], alice, {"freigabe": True}).status_code == 200
    assert api.get(f"/api/files/{record['id']}", alice).get_json()["doi_state"] == "findable"
    dois.work()
    assert dois.held(doi)["state"] == "findable"
    assert sent(dois, doi) == [("create", None), ("update", "publish")]
    row = dois.row(doi)
    assert row is not None and row.state == "findable" and row.registered_at is not None


def test_the_embargo_is_datacites_available_date(api: Api, alice: Account, dois: Dois):
    later = date.today() + timedelta(days=30)
    record = api.create(alice, freigabe="true", sperrfrist=later.isoformat())
    doi = dois.reserved(record["id"], alice)
    dois.work()
    held = dois.held(doi)
    assert held["state"] == "findable"
    assert {"date": later.isoformat(), "dateType": "Available"} in held["dates"]


def test_an_update_is_sent_only_when_the_payload_changed(api: Api, alice: Account, dois: Dois):
    record = api.create(alice, titel="Bericht", freigabe="true")
    doi = dois.reserved(record["id"], alice)
    dois.work()
    before = dois.calls()
    # Not in DataCite's metadata: nothing sent.
    assert api.patch(record["id"], alice, {"reihenfolge": 7}).status_code == 200
    dois.work()
    assert dois.calls() == before
    assert dois.row(doi).due_at is None  # type: ignore[union-attr]
    # The title is: one update.
    assert api.patch(record["id"], alice, {"titel": "Neuer Titel"}).status_code == 200
    dois.work()
    assert sent(dois, doi)[len(before) :] == [("update", "publish")]
    assert dois.held(doi)["titles"] == [{"title": "Neuer Titel"}]
    # A new version is too.
    assert api.replace(alice, record["id"], "v2.txt", b"version 2\n").status_code == 200
    dois.work()
    assert dois.held(doi)["version"] == "2"


def test_unrelease_hides_the_doi_and_release_shows_it_again(api: Api, alice: Account, dois: Dois):
    record = api.create(alice, freigabe="true")
    doi = dois.reserved(record["id"], alice)
    dois.work()
    assert api.patch(record["id"], alice, {"freigabe": False}).status_code == 200
    dois.work()
    assert dois.held(doi)["state"] == "registered"
    row = dois.row(doi)
    assert row is not None and row.withdrawn_at is not None
    assert row.withdrawn_reason == "unreleased" and row.wanted == "registered"
    got = api.get(f"/api/files/{record['id']}", alice).get_json()
    assert got["doi_state"] == "registered"
    # A hidden DOI stays: it can no longer be released.
    assert dois.release(record["id"], alice).status_code == 409
    assert api.patch(record["id"], alice, {"freigabe": True}).status_code == 200
    dois.work()
    assert dois.held(doi)["state"] == "findable"
    row = dois.row(doi)
    assert row is not None and row.withdrawn_at is None and row.withdrawn_reason is None


def test_delete_hides_the_doi_and_keeps_the_tombstone(api: Api, alice: Account, dois: Dois):
    record = api.create(alice, titel="Jahresbericht", autoren="Muster, Erika", freigabe="true")
    doi = dois.reserved(record["id"], alice)
    dois.work()
    assert api.delete(record["id"], alice).status_code == 204
    dois.work()
    assert dois.held(doi)["state"] == "registered"
    row = dois.row(doi)
    assert row is not None and row.withdrawn_reason == "deleted"
    assert row.withdrawn_at is not None and row.tombstone_title == "Jahresbericht"
    citation = row.tombstone_citation
    assert citation is not None and "Jahresbericht" in citation
    assert "\ue0f0" not in citation and "<" not in citation
    assert row.due_at is None and row.last_error is None


def test_the_tombstone_readers_reach_after_a_delete_and_an_unrelease_through_the_api(
    api: Api, alice: Account, dois: Dois
):
    """End to end: the writes set what the pages show, without touching the DOI row."""
    gone = api.create(alice, titel="Jahresbericht", autoren="Muster, Erika", freigabe="true")
    hidden = api.create(alice, titel="Halbjahresbericht", freigabe="true")
    gone_doi = dois.reserved(gone["id"], alice)
    hidden_doi = dois.reserved(hidden["id"], alice)
    assert api.delete(gone["id"], alice).status_code == 204
    assert api.patch(hidden["id"], alice, {"freigabe": False}).status_code == 200
    for record_id, doi, text in (
        (gone["id"], gone_doi, "Jahresbericht"),
        (hidden["id"], hidden_doi, "Halbjahresbericht"),
    ):
        page = api.client.get(f"/records/{record_id}", headers={"Accept": "text/html"})
        assert page.status_code == 410
        body = page.get_data(as_text=True)
        assert f"https://doi.org/{doi}" in body and text in body
        assert f'<https://doi.org/{doi}>; rel="cite-as"' in page.headers["Link"]
        public = api.client.get(f"/api/public/files/{record_id}")
        assert public.status_code == 410 and doi in public.get_json()["message"]


def test_delete_of_a_record_with_a_draft_doi_deletes_the_draft(
    api: Api, alice: Account, dois: Dois
):
    record = api.create(alice, freigabe="false")
    doi = dois.reserved(record["id"], alice)
    dois.work()
    assert api.delete(record["id"], alice).status_code == 204
    dois.work()
    assert doi not in dois.datacite.dois and dois.row(doi) is None


class TestRegisterAtSperrfrist:
    @pytest.fixture
    def stack_config(self, stack_config: dict[str, Any]) -> dict[str, Any]:
        return {**stack_config, "DATACITE_REGISTER_AT": "sperrfrist"}

    def test_registered_only_once_the_embargo_is_over(self, api: Api, alice: Account, dois: Dois):
        later = date.today() + timedelta(days=3)
        record = api.create(alice, freigabe="true", sperrfrist=later.isoformat())
        doi = dois.reserved(record["id"], alice)
        dois.work()
        assert dois.held(doi)["state"] == "draft"
        # The calendar moves on (the embargo ended yesterday): `flask doi work` notices.
        api.set_columns(record["id"], sperrfrist=date.today() - timedelta(days=1))
        output = dois.work()
        assert "Embargo over: 1" in output
        assert dois.held(doi)["state"] == "findable"
        assert "Embargo over: 0" in dois.work()
