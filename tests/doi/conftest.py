"""DOIs on (`DATACITE_*`) for the tests of this folder, on both stacks, with DataCite faked in
the process (tests/doi/standins.py) and the outbox worked by hand (`Dois.work`)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from flask import Flask

from app.extensions import db
from app.models import Doi
from tests.doi import standins
from tests.support.api import Account, Api

standins.install()

PREFIX = "10.5072"
DATACITE = {
    "DATACITE_URL": "https://api.test.datacite.org",
    "DATACITE_REPOSITORY": "TEST.REPO",
    "DATACITE_PASSWORD": "secret",
    "DATACITE_PREFIX": PREFIX,
    "PUBLIC_BASE_URL": "https://files.example.org",
}


@pytest.fixture
def stack_config(stack_config: dict[str, Any]) -> dict[str, Any]:
    return {**stack_config, **DATACITE}


@pytest.fixture
def datacite(app: Flask) -> standins.FakeDataCite:
    fake = standins.FakeDataCite()
    app.extensions["datacite"] = fake
    return fake


class Dois:
    """The DOI endpoints, the outbox and what the database holds of it."""

    def __init__(self, api: Api, datacite: standins.FakeDataCite) -> None:
        self.api = api
        self.app = api.app
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
def dois(api: Api, datacite: standins.FakeDataCite) -> Dois:
    return Dois(api, datacite)
