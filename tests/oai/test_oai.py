"""OAI-PMH 2.0: harvested with a real harvester (Sickle) over HTTP, and each verb's XML."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from lxml import etree
from sickle import Sickle
from sickle.oaiexceptions import NoRecordsMatch

from app.models import OaiTombstone
from app.oai import routes as oai_routes
from tests.files.test_list import insert_rows
from tests.support.api import Account, Api

NS = {
    "oai": "http://www.openarchives.org/OAI/2.0/",
    "dc": "http://purl.org/dc/elements/1.1/",
    "oai_dc": "http://www.openarchives.org/OAI/2.0/oai_dc/",
}
LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oai_routes, "PAGE_SIZE", 3)


def oai(api: Api, **params: str) -> Any:
    response = api.client.get("/oai", query_string=params)
    assert response.status_code == 200
    assert response.mimetype == "text/xml"
    return etree.fromstring(response.data)


def error_code(root: Any) -> str | None:
    errors = root.findall("oai:error", NS)
    return errors[0].get("code") if errors else None


def harvest(url: str, **params: str) -> dict[str, Any]:
    """Everything a harvester collects: identifier -> Sickle record (deleted ones included)."""
    sickle = Sickle(url, max_retries=0)
    try:
        records = sickle.ListRecords(metadataPrefix="oai_dc", ignore_deleted=False, **params)
        return {record.header.identifier: record for record in records}
    except NoRecordsMatch:
        return {}


def ident(record_id: str) -> str:
    return f"oai:file-repository.local:{record_id}"


def test_full_and_incremental_harvest(api: Api, alice: Account, server: str, small_pages):
    ids = insert_rows(
        api,
        alice,
        [
            {"created_at": LONG_AGO, "titel": f"Bericht {i}", "path": f"reports/{2020 + i % 2}"}
            for i in range(7)
        ]
        + [{"created_at": LONG_AGO, "titel": "Entwurf", "freigabe": False}],
    )
    first = harvest(server)
    assert set(first) == {ident(i) for i in ids[:7]}
    assert not any(record.header.deleted for record in first.values())
    sample = first[ident(ids[0])]
    assert sample.metadata["title"] == ["Bericht 0"]
    assert sample.header.setSpecs == ["reports", "reports:2020"]
    assert sample.header.datestamp == "2020-01-01T00:00:00Z"

    last_harvest = datetime.now(UTC).replace(microsecond=0)
    created = api.create(alice, "neu.pdf", titel="Neu", path="reports/2026")
    assert api.patch(ids[1], alice, {"titel": "Bericht 1, korrigiert"}).status_code == 200
    assert api.patch(ids[2], alice, {"freigabe": False}).status_code == 200
    assert api.delete(ids[3], alice).status_code == 204
    assert api.patch(ids[7], alice, {"freigabe": True}).status_code == 200

    since = harvest(server, **{"from": last_harvest.strftime("%Y-%m-%dT%H:%M:%SZ")})
    assert set(since) == {ident(i) for i in (created["id"], ids[1], ids[2], ids[3], ids[7])}
    assert since[ident(ids[1])].metadata["title"] == ["Bericht 1, korrigiert"]
    assert since[ident(ids[2])].header.deleted and since[ident(ids[3])].header.deleted
    assert since[ident(ids[3])].header.setSpecs == ["reports", "reports:2021"]
    assert not since[ident(ids[7])].header.deleted
    for record in since.values():
        stamp = datetime.strptime(record.header.datestamp, "%Y-%m-%dT%H:%M:%SZ")
        assert stamp.replace(tzinfo=UTC) >= last_harvest

    # A full harvest now knows the deletions too, and the record released again is live.
    everything = harvest(server)
    assert len(everything) == 9
    assert {i for i, r in everything.items() if r.header.deleted} == {ident(ids[2]), ident(ids[3])}
    assert api.patch(ids[2], alice, {"freigabe": True}).status_code == 200
    assert not harvest(server)[ident(ids[2])].header.deleted
    with api.app.app_context():
        from app.extensions import db

        assert db.session.get(OaiTombstone, uuid.UUID(ids[2])) is None
        assert db.session.get(OaiTombstone, uuid.UUID(ids[3])) is not None


def test_selective_harvest_by_set_and_dates(api: Api, alice: Account, server: str):
    ids = insert_rows(
        api,
        alice,
        [
            {"created_at": LONG_AGO, "path": "reports/2024"},
            {"created_at": LONG_AGO + timedelta(days=1), "path": "reports/2025/q1"},
            {"created_at": LONG_AGO + timedelta(days=2), "path": "presse"},
            {"created_at": LONG_AGO + timedelta(days=3)},
        ],
    )
    assert set(harvest(server, set="reports")) == {ident(ids[0]), ident(ids[1])}
    assert set(harvest(server, set="reports:2025")) == {ident(ids[1])}
    assert harvest(server, set="report") == {}
    assert set(harvest(server, **{"from": "2020-01-02", "until": "2020-01-03"})) == {
        ident(ids[1]),
        ident(ids[2]),
    }
    assert set(
        harvest(server, **{"from": "2020-01-02T00:00:00Z", "until": "2020-01-02T00:00:00Z"})
    ) == {ident(ids[1])}
    sets = Sickle(server).ListSets()
    assert [(s.setSpec, s.setName) for s in sets] == [
        ("presse", "presse"),
        ("reports", "reports"),
        ("reports:2024", "reports/2024"),
        ("reports:2025", "reports/2025"),
        ("reports:2025:q1", "reports/2025/q1"),
    ]


def test_identify(api: Api, alice: Account):
    insert_rows(api, alice, [{"created_at": LONG_AGO}])
    root = oai(api, verb="Identify")
    identify = root.find("oai:Identify", NS)
    assert identify.findtext("oai:baseURL", namespaces=NS) == "http://localhost/oai"
    assert identify.findtext("oai:protocolVersion", namespaces=NS) == "2.0"
    assert identify.findtext("oai:earliestDatestamp", namespaces=NS) == "2020-01-01T00:00:00Z"
    assert identify.findtext("oai:deletedRecord", namespaces=NS) == "persistent"
    assert identify.findtext("oai:granularity", namespaces=NS) == "YYYY-MM-DDThh:mm:ssZ"
    assert "@" in identify.findtext("oai:adminEmail", namespaces=NS)
    assert root.find("oai:request", NS).get("verb") == "Identify"
    assert root.findtext("oai:request", namespaces=NS) == "http://localhost/oai"
    post = api.client.post("/oai", data={"verb": "Identify"})
    assert post.status_code == 200 and b"<Identify>" in post.data


def test_get_record_and_metadata_formats(api: Api, alice: Account):
    record = api.create(
        alice,
        "r.pdf",
        titel="Arbeitsmarkt",
        autoren="Anna Weber; Ben Meyer",
        sachschlagwoerter="Arbeit, Markt",
        org_themen="Wirtschaft",
        beschreibung="Zahlen",
        aktiv_id="AKT-1",
        reprotyp="Bericht",
        erstellt_von="Intern",
        sperrfrist="2999-01-01",
    )
    identifier = f"oai:file-repository.local:{record['id']}"
    root = oai(api, verb="GetRecord", identifier=identifier, metadataPrefix="oai_dc")
    dc = root.find(".//oai_dc:dc", NS)
    values = {}
    for child in dc:
        values.setdefault(etree.QName(child).localname, []).append(child.text)
    public_url = f"http://localhost/api/public/files/{record['id']}"
    assert values == {
        "title": ["Arbeitsmarkt"],
        "creator": ["Anna Weber", "Ben Meyer"],
        "subject": ["Arbeit", "Markt", "Wirtschaft"],
        "description": ["Zahlen"],
        # The publication date is the day the content is public to all (issue 49).
        "date": ["2999-01-01"],
        "type": ["Text", "Bericht"],
        "format": ["application/pdf"],
        "identifier": [public_url, public_url + "/download", "AKT-1"],
        "rights": ["Embargoed until 2999-01-01."],
    }
    assert b"Intern" not in etree.tostring(root)
    formats = oai(api, verb="ListMetadataFormats")
    assert [e.text for e in formats.iterfind(".//oai:metadataPrefix", NS)] == [
        "oai_dc",
        "oai_datacite",
    ]


def test_list_identifiers_pages_with_resumption_tokens(api: Api, alice: Account, small_pages):
    ids = insert_rows(
        api, alice, [{"created_at": LONG_AGO + timedelta(seconds=i)} for i in range(7)]
    )
    seen, cursors, root = [], [], oai(api, verb="ListIdentifiers", metadataPrefix="oai_dc")
    while True:
        seen += [e.text for e in root.iterfind(".//oai:header/oai:identifier", NS)]
        token = root.find(".//oai:resumptionToken", NS)
        assert token.get("completeListSize") == "7"
        cursors.append(token.get("cursor"))
        if not token.text:
            assert token.get("expirationDate") is None
            break
        expires = datetime.strptime(token.get("expirationDate"), "%Y-%m-%dT%H:%M:%SZ")
        assert expires.replace(tzinfo=UTC) > datetime.now(UTC) + timedelta(hours=23)
        root = oai(api, verb="ListIdentifiers", resumptionToken=token.text)
    assert seen == [f"oai:file-repository.local:{i}" for i in ids]
    assert cursors == ["0", "3", "6"]
    assert root.find(".//oai:metadata", NS) is None


def _token(**state: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(state).encode()).decode()


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({}, "badVerb"),
        ({"verb": "Harvest"}, "badVerb"),
        ({"verb": ["Identify", "Identify"]}, "badVerb"),
        ({"verb": "Identify", "extra": "1"}, "badArgument"),
        ({"verb": "ListRecords"}, "badArgument"),
        ({"verb": "ListRecords", "metadataPrefix": ["oai_dc", "oai_dc"]}, "badArgument"),
        ({"verb": "ListRecords", "metadataPrefix": "oai_dc", "from": "2020-13-01"}, "badArgument"),
        (
            {"verb": "ListRecords", "metadataPrefix": "oai_dc", "from": "2020-01-01T00:00Z"},
            "badArgument",
        ),
        (
            {
                "verb": "ListRecords",
                "metadataPrefix": "oai_dc",
                "from": "2020-01-01",
                "until": "2020-01-02T00:00:00Z",
            },
            "badArgument",
        ),
        (
            {
                "verb": "ListRecords",
                "metadataPrefix": "oai_dc",
                "from": "2021-01-01",
                "until": "2020-01-01",
            },
            "badArgument",
        ),
        (
            {"verb": "ListRecords", "resumptionToken": "x", "metadataPrefix": "oai_dc"},
            "badArgument",
        ),
        ({"verb": "GetRecord", "identifier": "oai:file-repository.local:x"}, "badArgument"),
        ({"verb": "ListRecords", "metadataPrefix": "marc21"}, "cannotDisseminateFormat"),
        (
            {
                "verb": "GetRecord",
                "identifier": "oai:file-repository.local:x",
                "metadataPrefix": "oai_dc",
            },
            "idDoesNotExist",
        ),
        (
            {
                "verb": "GetRecord",
                "identifier": f"oai:file-repository.local:{uuid.uuid4()}",
                "metadataPrefix": "oai_dc",
            },
            "idDoesNotExist",
        ),
        (
            {"verb": "ListMetadataFormats", "identifier": f"oai:elsewhere:{uuid.uuid4()}"},
            "idDoesNotExist",
        ),
        ({"verb": "ListRecords", "metadataPrefix": "oai_dc", "set": "nowhere"}, "noRecordsMatch"),
        ({"verb": "ListRecords", "metadataPrefix": "oai_dc", "set": "bad set"}, "noRecordsMatch"),
        (
            {"verb": "ListIdentifiers", "metadataPrefix": "oai_dc", "from": "2999-01-01"},
            "noRecordsMatch",
        ),
        ({"verb": "ListRecords", "resumptionToken": "garbage"}, "badResumptionToken"),
        ({"verb": "ListSets", "resumptionToken": "anything"}, "badResumptionToken"),
        (
            {
                "verb": "ListRecords",
                "resumptionToken": _token(
                    verb="ListRecords",
                    after=["2020-01-01T00:00:00+00:00", str(uuid.uuid4())],
                    cursor=3,
                    size=7,
                    expires="2020-01-02T00:00:00+00:00",
                ),
            },
            "badResumptionToken",
        ),
        (
            {
                "verb": "ListIdentifiers",
                "resumptionToken": _token(
                    verb="ListRecords",
                    after=["2020-01-01T00:00:00+00:00", str(uuid.uuid4())],
                    cursor=3,
                    size=7,
                    expires="2999-01-02T00:00:00+00:00",
                ),
            },
            "badResumptionToken",
        ),
        ({"verb": "ListSets"}, "noSetHierarchy"),
    ],
)
def test_protocol_errors(api: Api, alice: Account, params: dict[str, Any], code: str):
    insert_rows(api, alice, [{"created_at": LONG_AGO}])
    query = [(k, v) for k, vs in params.items() for v in ([vs] if isinstance(vs, str) else vs)]
    response = api.client.get("/oai", query_string=query)
    assert response.status_code == 200
    root = etree.fromstring(response.data)
    assert error_code(root) == code
    assert root.find("oai:error", NS).text
    request_element = root.find("oai:request", NS)
    if code in ("badVerb", "badArgument"):
        assert request_element.attrib == {}
    assert list(root)[-1].tag == f"{{{NS['oai']}}}error" and len(root) == 3


def test_base_url_follows_the_trusted_proxy_and_identifiers_do_not(make_sqlite_app):
    app = make_sqlite_app(PROXY_COUNT=1)
    response = app.test_client().get(
        "/oai",
        query_string={"verb": "Identify"},
        headers={"X-Forwarded-Proto": "https", "X-Forwarded-Host": "repo.example.org"},
    )
    root = etree.fromstring(response.data)
    assert root.findtext(".//oai:baseURL", namespaces=NS) == "https://repo.example.org/oai"
    sample = root.findtext(".//{*}sampleIdentifier")
    assert sample.startswith("oai:file-repository.local:")


def test_control_characters_never_break_the_xml(api: Api, alice: Account):
    (record_id,) = insert_rows(api, alice, [{"created_at": LONG_AGO, "titel": "Eins\x01Zwei"}])
    root = oai(
        api,
        verb="GetRecord",
        identifier=f"oai:file-repository.local:{record_id}",
        metadataPrefix="oai_dc",
    )
    assert root.findtext(".//dc:title", namespaces=NS) == "EinsZwei"
    bad = oai(api, verb="GetRecord", identifier="\x01", metadataPrefix="oai_dc")
    assert error_code(bad) == "idDoesNotExist"


def test_a_change_that_fails_to_commit_leaves_no_tombstone_and_the_index_as_it_was(
    api: Api, alice: Account
):
    """Tombstones and the SQLite search rows are written by the flush of the change itself:
    a commit that fails after that flush takes them back with the change."""
    from sqlalchemy import event
    from sqlalchemy.exc import OperationalError
    from sqlalchemy.orm import Session

    record = api.create(alice, "a.pdf", titel="Eindeutig")

    def fail(_session, _context):
        raise OperationalError("COMMIT", {}, Exception("server closed the connection"))

    event.listen(Session, "after_flush_postexec", fail)
    try:
        changed = api.patch(record["id"], alice, {"freigabe": False, "titel": "Anders"})
        deleted = api.delete(record["id"], alice)
    finally:
        event.remove(Session, "after_flush_postexec", fail)
    assert changed.status_code == 503 and deleted.status_code == 503
    with api.app.app_context():
        from app.extensions import db

        assert db.session.get(OaiTombstone, uuid.UUID(record["id"])) is None
    found = api.client.get("/api/public/files", query_string={"q": "eindeutig"}).get_json()
    assert [r["id"] for r in found["data"]] == [record["id"]]
    assert (
        api.client.get("/api/public/files", query_string={"q": "anders"}).get_json()["data"] == []
    )
    assert not harvest_ids(api, deleted=True)


def harvest_ids(api: Api, *, deleted: bool) -> list[str]:
    root = oai(api, verb="ListIdentifiers", metadataPrefix="oai_dc")
    return [
        header.findtext("oai:identifier", namespaces=NS)
        for header in root.iterfind(".//oai:header", NS)
        if (header.get("status") == "deleted") == deleted
    ]
