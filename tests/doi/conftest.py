"""DOIs on (`DATACITE_*`) for the tests of this folder, on both stacks, against the fake
DataCite on loopback (tests/support/datacite.py) through the real client; the outbox is
worked by hand (`Dois.work`, i.e. `flask doi work`) unless a test turns the thread on."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from flask import Flask

from app.extensions import db
from app.models import Doi
from tests.support.api import Account, Api
from tests.support.datacite import FakeDataCite

PREFIX = "10.80001"
#: What the settings need besides DATACITE_URL (the fake's address).
DATACITE = {
    "DATACITE_REPOSITORY": "TEST.REPOSITORY",
    "DATACITE_PASSWORD": "test-password",
    "DATACITE_PREFIX": PREFIX,
    "PUBLIC_BASE_URL": "https://files.example.org",
    # A retry never falls due by itself within a test: the tests move `due_at`.
    "DOI_RETRY_SECONDS": 3600.0,
}
VERBS = {"POST": "create", "PUT": "update", "DELETE": "delete", "GET": "get"}


@pytest.fixture
def stack_config(stack_config: dict[str, Any], datacite_server: FakeDataCite) -> dict[str, Any]:
    return {**stack_config, **DATACITE, "DATACITE_URL": datacite_server.url}


class Dois:
    """The DOI endpoints, the outbox, what the database and DataCite hold."""

    def __init__(self, api: Api, datacite: FakeDataCite) -> None:
        self.api = api
        self.app: Flask = api.app
        self.datacite = datacite

    def reserve(self, record_id: str, account: Account) -> Any:
        return self.api.client.post(f"/api/files/{record_id}/doi", headers=account.auth)

    def release(self, record_id: str, account: Account) -> Any:
        return self.api.client.delete(f"/api/files/{record_id}/doi", headers=account.auth)

    def reserved(self, record_id: str, account: Account) -> str:
        response = self.reserve(record_id, account)
        assert response.status_code == 201, response.get_json()
        return response.get_json()["doi"]

    def cli(self, *args: str) -> Any:
        return self.app.test_cli_runner().invoke(args=["doi", *args])

    def work(self) -> str:
        result = self.cli("work")
        assert result.exit_code == 0, result.output
        return result.output

    def calls(self, doi: str | None = None) -> list[tuple[str, str | None]]:
        """What DataCite was asked and accepted, (verb, event), of one DOI if given."""
        found = []
        for request in self.datacite.requests:
            named = request.path.partition("/dois/")[2] or request.attributes.get("doi", "")
            if request.status < 300 and (doi is None or named.lower() == doi):
                found.append((VERBS[request.method], request.attributes.get("event")))
        return found

    def held(self, doi: str) -> dict[str, Any]:
        """What DataCite holds of the DOI (its attributes and `state`)."""
        return self.datacite.dois[doi]

    def row(self, doi: str) -> Doi | None:
        with self.app.app_context():
            found = db.session.get(Doi, doi)
            db.session.expunge_all()
            db.session.remove()
            return found

    def row_of(self, record_id: str) -> Doi | None:
        with self.app.app_context():
            found = db.session.query(Doi).filter_by(record_id=uuid.UUID(record_id)).first()
            db.session.expunge_all()
            db.session.remove()
            return found


@pytest.fixture
def dois(api: Api, datacite_server: FakeDataCite) -> Dois:
    return Dois(api, datacite_server)
