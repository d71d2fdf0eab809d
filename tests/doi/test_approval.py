"""With RELEASE_APPROVAL=on the approval is the write that makes the record public: it
registers the DOI (issue 40)."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from tests.doi.conftest import Dois
from tests.support.api import Account, Api


@pytest.fixture
def stack_config(stack_config: dict[str, Any]) -> dict[str, Any]:
    return {**stack_config, "RELEASE_APPROVAL": "on"}


def test_the_approval_registers_the_doi(app: Flask, api: Api, alice: Account, dois: Dois):
    carol = api.account("carol@example.org")
    granted = app.test_cli_runner().invoke(args=["users", "grant-approver", carol.email])
    assert granted.exit_code == 0, granted.output
    upload = api.upload(alice, titel="Bericht", freigabe="true").get_json()
    record, [request] = upload["files"][0], upload["release_requests"]
    doi = dois.reserved(record["id"], alice)
    dois.work()
    assert dois.held(doi)["state"] == "draft"
    approved = api.client.post(
        f"/api/release-requests/{request['id']}/approve", json={}, headers=carol.auth
    )
    assert approved.status_code == 200, approved.get_json()
    dois.work()
    assert dois.held(doi)["state"] == "findable"
