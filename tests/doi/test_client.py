"""The DataCite client (app/doi/client.py) against the fake DataCite on loopback
(tests/support/datacite.py): what it sends, DataCite's state machine, refusals (4xx with
DataCite's errors) and unavailability (5xx, timeouts, refused connections)."""

from __future__ import annotations

import base64
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from app.doi import payload
from app.doi.client import DataCite, DataCiteRejected, DataCiteUnavailable, error_messages
from app.models import FileRecord
from tests.support.datacite import FakeDataCite

DOI = "10.80001/ABCD-1234"
STORED = DOI.lower()


def attributes(doi: str = DOI, **fields: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "id": uuid.UUID("6f1c2d4e-0000-4000-8000-000000000002"),
        "original_name": "daten.csv",
        "mime_type": "text/csv",
        "size": 10,
        "created_at": datetime(2025, 5, 6, tzinfo=UTC),
        "version": 1,
        "titel": "Messreihe Ü",
        "autoren": "Müller, Anna",
    }
    values.update(fields)
    return payload.attributes(
        FileRecord(**values),
        doi,
        landing_url="https://repo.example.org/records/1",
        publisher="Institut",
        available=None,
    )


@pytest.fixture
def datacite(datacite_server: FakeDataCite) -> DataCite:
    fake = datacite_server
    return DataCite(fake.url, fake.repository, fake.password, timeout=5)


def test_a_draft_is_created_with_a_json_api_body_and_basic_auth(datacite, datacite_server):
    sent = attributes()
    held = datacite.create_draft(DOI, sent)
    assert held["state"] == "draft" and held["doi"] == STORED
    assert held["titles"] == [{"title": "Messreihe Ü"}]
    [request] = datacite_server.requests
    assert (request.method, request.path, request.status) == ("POST", "/dois", 201)
    assert request.headers["Content-Type"] == "application/vnd.api+json"
    assert request.headers["Accept"] == "application/vnd.api+json"
    credentials = base64.b64decode(request.headers["Authorization"].removeprefix("Basic "))
    assert credentials == b"TEST.REPOSITORY:test-password"
    assert request.body == {"data": {"type": "dois", "attributes": sent}}
    assert datacite_server.dois[STORED]["state"] == "draft"


def test_the_state_machine_from_draft_to_findable_hidden_and_back(datacite, datacite_server):
    datacite.create_draft(DOI, attributes())
    assert datacite.update(DOI, attributes(), "register")["state"] == "registered"
    assert datacite.update(DOI, attributes(), "publish")["state"] == "findable"
    assert datacite.hide(DOI)["state"] == "registered"
    assert datacite.update(DOI, attributes(), "publish")["state"] == "findable"
    # An event that does not apply changes nothing, as at DataCite; there is no way back to
    # draft.
    assert datacite.update(DOI, attributes(), "register")["state"] == "findable"
    with pytest.raises(ValueError):
        datacite.update(DOI, attributes(), "draft")
    assert datacite.get(DOI)["state"] == "findable"
    events = [r.attributes.get("event") for r in datacite_server.requests if r.method == "PUT"]
    assert events == ["register", "publish", "hide", "publish", "register"]
    assert datacite_server.requests[-1].method == "GET"


def test_a_draft_is_published_at_once_and_updated_in_place(datacite, datacite_server):
    datacite.create_draft(DOI, attributes())
    assert datacite.update(DOI, attributes(), "publish")["state"] == "findable"
    held = datacite.update(DOI, attributes(titel="Neuer Titel"), None)
    assert held["state"] == "findable"
    assert datacite.get(DOI)["titles"] == [{"title": "Neuer Titel"}]
    assert "event" not in datacite_server.requests[-2].attributes


def test_only_a_draft_can_be_deleted(datacite, datacite_server):
    datacite.create_draft(DOI, attributes())
    datacite.delete(DOI)
    assert datacite.get(DOI) is None
    assert STORED not in datacite_server.dois
    other = "10.80001/wxyz-9876"
    datacite.create_draft(other, attributes(other))
    datacite.update(other, attributes(other), "publish")
    with pytest.raises(DataCiteRejected) as refused:
        datacite.delete(other)
    assert (refused.value.status, refused.value.messages) == (405, ["Method not allowed"])
    assert datacite_server.dois[other]["state"] == "findable"


def test_deleting_a_doi_datacite_does_not_know_is_done_already(datacite, datacite_server):
    datacite.delete(DOI)
    assert datacite.get(DOI) is None
    assert [r.status for r in datacite_server.requests] == [404, 404]


def test_leaving_draft_without_an_address_is_refused_with_datacites_message(
    datacite, datacite_server
):
    without_url = {k: v for k, v in attributes().items() if k != "url"}
    datacite.create_draft(DOI, without_url)
    with pytest.raises(DataCiteRejected) as refused:
        datacite.update(DOI, without_url, "publish")
    assert refused.value.status == 422
    assert refused.value.messages == ["url: Can't be blank"]
    assert "url: Can't be blank" in str(refused.value)
    assert datacite_server.dois[STORED]["state"] == "draft"


def test_a_payload_outside_the_schema_is_refused_with_each_place(datacite):
    broken = attributes()
    broken["types"] = {"resourceTypeGeneral": "Paper"}
    broken["publicationYear"] = "25"
    with pytest.raises(DataCiteRejected) as refused:
        datacite.create_draft(DOI, broken)
    assert refused.value.status == 422
    assert sorted(m.partition(":")[0] for m in refused.value.messages) == [
        "publicationYear",
        "types",
    ]
    assert datacite.get(DOI) is None


def test_wrong_credentials_and_a_foreign_prefix_are_refused(datacite_server):
    fake = datacite_server
    wrong = DataCite(fake.url, fake.repository, "not-the-password", timeout=5)
    with pytest.raises(DataCiteRejected) as refused:
        wrong.create_draft(DOI, attributes())
    assert (refused.value.status, refused.value.messages) == (401, ["Bad credentials."])
    right = DataCite(fake.url, fake.repository, fake.password, timeout=5)
    foreign = "10.99999/abcd-1234"
    with pytest.raises(DataCiteRejected) as refused:
        right.create_draft(foreign, attributes(foreign))
    assert refused.value.status == 403
    assert fake.dois == {}


def test_creating_again_a_draft_an_earlier_try_made_updates_it(datacite, datacite_server):
    datacite.create_draft(DOI, attributes(titel="Erster Versuch"))
    held = datacite.create_draft(DOI, attributes(titel="Zweiter Versuch"))
    assert held["state"] == "draft"
    assert datacite_server.dois[STORED]["titles"] == [{"title": "Zweiter Versuch"}]
    datacite.update(DOI, attributes(), "publish")
    with pytest.raises(DataCiteRejected) as refused:
        datacite.create_draft(DOI, attributes())
    assert refused.value.messages == ["doi: This DOI has already been taken"]
    assert datacite_server.dois[STORED]["state"] == "findable"


@pytest.mark.parametrize("status", [500, 502, 503, 429])
def test_a_server_error_is_unavailable_and_the_next_call_succeeds(
    datacite, datacite_server, status
):
    datacite_server.fail_next(1, status=status)
    with pytest.raises(DataCiteUnavailable, match=str(status)):
        datacite.create_draft(DOI, attributes())
    assert datacite_server.dois == {}
    assert datacite.create_draft(DOI, attributes())["state"] == "draft"


def test_datacite_answering_503_to_everything(datacite, datacite_server):
    datacite_server.down(refuse=False)
    for call in (
        lambda: datacite.create_draft(DOI, attributes()),
        lambda: datacite.get(DOI),
        lambda: datacite.delete(DOI),
    ):
        with pytest.raises(DataCiteUnavailable, match="503"):
            call()
    datacite_server.up()
    assert datacite.get(DOI) is None


def test_a_refused_connection_is_unavailable_at_once(datacite, datacite_server):
    datacite.create_draft(DOI, attributes())
    datacite_server.down()
    started = time.monotonic()
    with pytest.raises(DataCiteUnavailable, match="refused"):
        datacite.update(DOI, attributes(), "publish")
    assert time.monotonic() - started < 2
    datacite_server.up()
    assert datacite.update(DOI, attributes(), "publish")["state"] == "findable"


def test_a_slow_datacite_times_out_and_a_second_try_finds_the_draft(datacite_server):
    fake = datacite_server
    patient = DataCite(fake.url, fake.repository, fake.password, timeout=0.3)
    fake.slow(5)
    started = time.monotonic()
    with pytest.raises(DataCiteUnavailable, match="timed out"):
        patient.create_draft(DOI, attributes())
    assert time.monotonic() - started < 3
    # DataCite did create it; the answer came too late. The next try makes it the same draft.
    assert fake.dois[STORED]["state"] == "draft"
    fake.slow(0)
    assert patient.create_draft(DOI, attributes())["state"] == "draft"
    assert [r.method for r in fake.requests] == ["POST", "POST", "GET", "PUT"]


def test_a_redirect_is_refused_not_followed(datacite, datacite_server):
    datacite_server.fail_next(1, status=301)
    with pytest.raises(DataCiteRejected) as refused:
        datacite.create_draft(DOI, attributes())
    assert refused.value.status == 301
    assert refused.value.messages == [
        f"redirected to {datacite_server.url}/moved/dois: DATACITE_URL should name DataCite's API"
    ]
    assert [r.method for r in datacite_server.requests] == ["POST"]


def test_datacites_errors_are_read_as_source_and_title():
    body = (
        b'{"errors":[{"source":"url","uid":"10.80001/x","title":"Can\'t be blank"},'
        b'{"status":"403","title":"You are not authorized to access this resource."}]}'
    )
    assert error_messages(body, 422, "Unprocessable Entity") == [
        "url: Can't be blank",
        "You are not authorized to access this resource.",
    ]
    assert error_messages(b"<html>Bad gateway</html>", 502, "Bad Gateway") == ["502 Bad Gateway"]
    assert error_messages(b'{"errors":{"title":"Bad credentials."}}', 401, "") == [
        "Bad credentials."
    ]
