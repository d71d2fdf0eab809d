"""Type detection through the API: every allowed type is stored as detected, the rest refused."""

from __future__ import annotations

import pytest

from tests.support import samples
from tests.support.api import Account, Api

ALLOWED = samples.allowed_samples()
HOSTILE = samples.hostile_samples()


def test_every_allowed_type_is_accepted_and_served_back(api: Api, alice: Account):
    assert len({s.mime_type for s in ALLOWED}) == 18
    files = [(s.filename, s.data) for s in ALLOWED]
    response = api.upload(alice, files[:9])
    assert response.status_code == 201, response.get_json()
    second = api.upload(alice, files[9:])
    assert second.status_code == 201, second.get_json()
    records = response.get_json()["files"] + second.get_json()["files"]
    assert [r["mime_type"] for r in records] == [s.mime_type for s in ALLOWED]
    for record, sample in zip(records, ALLOWED, strict=True):
        download = api.get(f"/api/files/{record['id']}/download", alice)
        assert download.data == sample.data
        assert download.headers["Content-Type"] == sample.mime_type


@pytest.mark.parametrize("name,data", HOSTILE, ids=[name for name, _ in HOSTILE])
def test_hostile_content_is_refused(api: Api, alice: Account, name: str, data: bytes):
    response = api.upload(alice, [(name, data)])
    assert response.status_code == 422
    errors = response.get_json()["errors"]
    assert list(errors) == ["files.0"]
    assert api.rows() == [] and api.objects() == set()


def test_replace_uses_the_same_detection(api: Api, alice: Account):
    record = api.create(alice)
    for name, data in HOSTILE[:5]:
        response = api.replace(alice, record["id"], name, data)
        assert response.status_code == 422
        assert list(response.get_json()["errors"]) == ["file"]
    assert len(api.objects()) == 1
