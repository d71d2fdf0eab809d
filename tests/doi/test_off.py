"""Without `DATACITE_*`, nothing of DOIs shows (issue 40)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.api import Account, Api


@pytest.fixture
def stack_config(stack_config: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in stack_config.items() if not k.startswith("DATACITE_")}


def test_no_doi_fields_and_no_endpoint_without_datacite(api: Api, alice: Account):
    record = api.create(alice)
    assert "doi" not in record and "doi_state" not in record
    got = api.get(f"/api/files/{record['id']}", alice).get_json()
    assert "doi" not in got and "doi_state" not in got
    listed = api.get("/api/files", alice).get_json()["data"][0]
    assert "doi" not in listed
    response = api.client.post(f"/api/files/{record['id']}/doi", headers=alice.auth)
    assert response.status_code == 404
