"""The fake DataCite (tests/support/datacite.py) answers as DataCite does, seen over plain HTTP:
what the client's tests and the outbox's tests rely on."""

from __future__ import annotations

import base64
import http.client
import json
from typing import Any

from tests.support.datacite import FakeDataCite

AUTH = "Basic " + base64.b64encode(b"TEST.REPOSITORY:test-password").decode()
COMPLETE = {
    "url": "https://repo.example.org/records/1",
    "creators": [{"name": "Müller, Anna"}],
    "titles": [{"title": "Titel"}],
    "publisher": {"name": "Institut"},
    "publicationYear": "2025",
    "types": {"resourceTypeGeneral": "Dataset"},
    "schemaVersion": "http://datacite.org/schema/kernel-4",
}


def call(
    fake: FakeDataCite,
    method: str,
    path: str,
    attributes: dict[str, Any] | None = None,
    authorization: str = AUTH,
) -> tuple[int, dict[str, str], Any]:
    connection = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=5)
    try:
        body = None
        if attributes is not None:
            body = json.dumps({"data": {"type": "dois", "attributes": attributes}})
        headers = {"Authorization": authorization, "Content-Type": "application/vnd.api+json"}
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        raw = response.read()
        return response.status, dict(response.getheaders()), json.loads(raw) if raw else None
    finally:
        connection.close()


def test_unknown_credentials_are_401_with_datacites_error(datacite_server):
    status, _, body = call(datacite_server, "GET", "/dois/10.80001/x", authorization="Basic eA==")
    assert (status, body) == (401, {"errors": [{"status": "401", "title": "Bad credentials."}]})


def test_a_draft_may_lack_what_a_registered_doi_needs(datacite_server):
    status, _, body = call(datacite_server, "POST", "/dois", {"doi": "10.80001/AB-1"})
    assert status == 201
    assert body["data"]["id"] == "10.80001/ab-1"
    assert body["data"]["attributes"]["state"] == "draft"
    status, _, body = call(
        datacite_server, "PUT", "/dois/10.80001/ab-1", {"event": "register", "url": COMPLETE["url"]}
    )
    assert status == 422
    sources = sorted(error["source"] for error in body["errors"])
    assert sources == ["attributes"] * 6
    assert {error["uid"] for error in body["errors"]} == {"10.80001/ab-1"}
    assert datacite_server.dois["10.80001/ab-1"]["state"] == "draft"
    status, _, body = call(datacite_server, "PUT", "/dois/10.80001/ab-1", COMPLETE)
    assert status == 200
    status, _, body = call(datacite_server, "PUT", "/dois/10.80001/ab-1", {"event": "register"})
    assert (status, body["data"]["attributes"]["state"]) == (200, "registered")


def test_put_creates_an_unknown_doi_and_delete_refuses_a_registered_one(datacite_server):
    status, _, body = call(
        datacite_server, "PUT", "/dois/10.80001/cd-2", {**COMPLETE, "event": "publish"}
    )
    assert (status, body["data"]["attributes"]["state"]) == (201, "findable")
    status, headers, body = call(datacite_server, "DELETE", "/dois/10.80001/cd-2")
    assert (status, body) == (405, {"errors": [{"status": "405", "title": "Method not allowed"}]})
    assert "DELETE" not in headers["Allow"]


def test_a_doi_outside_datacites_syntax_or_prefix_is_refused(datacite_server):
    status, _, body = call(datacite_server, "POST", "/dois", {"doi": "10.80001/mit leerzeichen"})
    assert (status, body["errors"][0]["source"]) == (422, "doi")
    status, _, body = call(datacite_server, "POST", "/dois", {"doi": "10.12345/ab-1"})
    assert status == 403
    assert datacite_server.dois == {}


def test_failures_are_counted_and_every_request_is_recorded(datacite_server):
    datacite_server.fail_next(2, status=502)
    statuses = [call(datacite_server, "GET", "/dois/10.80001/x")[0] for _ in range(3)]
    assert statuses == [502, 502, 404]
    assert [(r.method, r.path, r.status) for r in datacite_server.requests] == [
        ("GET", "/dois/10.80001/x", 502),
        ("GET", "/dois/10.80001/x", 502),
        ("GET", "/dois/10.80001/x", 404),
    ]
