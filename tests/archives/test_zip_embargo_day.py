"""Which records a folder's ZIP packs, at the embargo's edges: the SQL form of the download
rule (`access.downloadable`) for the public, an owner and an administrator. The mutation run
(docs/mutation.md) runs these for that rule; tests/archives/test_archives.py is too slow for it.
"""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime, timedelta

import pytest

from app.archives import services as archives
from tests.support.api import Account, Api


def _packed(response) -> set[str]:
    assert response.status_code == 200, response.get_json()
    archive = zipfile.ZipFile(io.BytesIO(response.get_data()))
    return {item["id"] for item in json.loads(archive.read(archives.MANIFEST_NAME))["files"]}


@pytest.fixture
def edges(api: Api, alice: Account) -> dict[str, str]:
    """Alice's records in one folder, released or not, with embargoes around today (UTC, the
    tests' APP_TIMEZONE)."""
    today = datetime.now(UTC).date()

    def day(offset: int) -> str:
        return (today + timedelta(days=offset)).isoformat()

    made = {
        "open": api.create(alice, "open.txt", b"open\n", path="edge"),
        "ended_yesterday": api.create(alice, "y.txt", b"y\n", path="edge", sperrfrist=day(-1)),
        "ends_today": api.create(alice, "t.txt", b"t\n", path="edge", sperrfrist=day(0)),
        "ends_tomorrow": api.create(alice, "m.txt", b"m\n", path="edge", sperrfrist=day(1)),
        "unreleased": api.create(alice, "u.txt", b"u\n", path="edge", freigabe="false"),
        "unreleased_ended": api.create(
            alice, "v.txt", b"v\n", path="edge", freigabe="false", sperrfrist=day(-1)
        ),
    }
    return {name: record["id"] for name, record in made.items()}


DOWNLOADABLE_NOW = {"open", "ended_yesterday", "ends_today"}


def test_the_public_zip_packs_released_records_whose_embargo_ended_today_or_before(api: Api, edges):
    packed = _packed(api.client.get("/api/public/files.zip", query_string={"path": "edge"}))
    assert packed == {edges[name] for name in DOWNLOADABLE_NOW}


def test_an_owners_zip_packs_only_what_she_may_download_today(api: Api, alice: Account, edges):
    packed = _packed(api.get("/api/files.zip?path=edge", alice))
    assert packed == {edges[name] for name in DOWNLOADABLE_NOW}


def test_an_administrators_zip_packs_every_record_whatever_its_release_or_embargo(
    api: Api, admin: Account, edges
):
    assert _packed(api.get("/api/files.zip?path=edge", admin)) == set(edges.values())


def test_another_users_zip_packs_none_of_alices_records(api: Api, bob: Account, edges):
    assert _packed(api.get("/api/files.zip?path=edge", bob)) == set()
