"""The public interface: released records only, no token, cacheable but revalidated."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.support import samples
from tests.support.api import PUBLIC_FIELDS, Account, Api

PUBLIC_CACHE = "public, max-age=0, must-revalidate"


@pytest.fixture
def records(api: Api, alice: Account, bob: Account) -> dict[str, dict]:
    tomorrow = (datetime.now(UTC).date() + timedelta(days=1)).isoformat()
    return {
        "released": api.create(
            alice,
            "r.pdf",
            erstellt_von="E",
            freigegeben_von="F",
            path="pub/a",
            reprotyp="Scan",
            aktiv_id="A1",
        ),
        "embargoed": api.create(bob, "e.pdf", sperrfrist=tomorrow, path="pub/b"),
        "unreleased": api.create(alice, "u.pdf", freigabe="false", path="pub/c"),
    }


def test_list_shows_only_released_records_without_internal_fields(api: Api, records):
    response = api.client.get("/api/public/files")
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == PUBLIC_CACHE
    body = response.get_json()
    assert {r["id"] for r in body["data"]} == {
        records["released"]["id"],
        records["embargoed"]["id"],
    }
    for record in body["data"]:
        assert list(record) == PUBLIC_FIELDS
    assert body["total"] == 2 and body["path"] == "http://localhost/api/public/files"


def test_no_query_parameter_reveals_unreleased_records(api: Api, records):
    for params in (
        {"freigabe": "0"},
        {"freigabe": "false"},
        {"path": "pub/c"},
        {"freigabe": "0", "path": "pub"},
    ):
        body = api.client.get("/api/public/files", query_string=params).get_json()
        assert records["unreleased"]["id"] not in {r["id"] for r in body["data"]}


def test_public_filters(api: Api, records):
    def ids(**params):
        body = api.client.get("/api/public/files", query_string=params).get_json()
        return {r["id"] for r in body["data"]}

    assert ids(path="pub/a") == {records["released"]["id"]}
    assert ids(reprotyp="Scan") == {records["released"]["id"]}
    assert ids(aktiv_id="A1") == {records["released"]["id"]}
    assert ids(since="2000-01-01") == {records["released"]["id"], records["embargoed"]["id"]}
    assert ids(since="2999-01-01") == set()
    bad = api.client.get("/api/public/files", query_string={"since": "soon"})
    assert bad.status_code == 422
    assert bad.headers["Cache-Control"] == PUBLIC_CACHE


def test_single_read(api: Api, records):
    released = api.client.get(f"/api/public/files/{records['released']['id']}")
    assert released.status_code == 200
    assert list(released.get_json()) == PUBLIC_FIELDS
    assert released.headers["Cache-Control"] == PUBLIC_CACHE
    embargoed = api.client.get(f"/api/public/files/{records['embargoed']['id']}")
    assert embargoed.status_code == 200


@pytest.mark.parametrize("suffix", ["", "/download"])
def test_unreleased_missing_and_malformed_ids_are_the_same_404(api: Api, records, suffix):
    answers = []
    for record_id in (records["unreleased"]["id"], "00000000-0000-4000-8000-000000000000", "nope"):
        response = api.client.get(f"/api/public/files/{record_id}{suffix}")
        assert response.headers["Cache-Control"] == PUBLIC_CACHE
        answers.append((response.status_code, response.get_json()))
    assert answers == [(404, {"message": "Not found."})] * 3


def test_download_of_a_released_file(api: Api, alice: Account):
    data = samples.png_bytes()
    record = api.create(alice, "bild.png", data)
    response = api.client.get(f"/api/public/files/{record['id']}/download")
    assert response.status_code == 200
    assert response.data == data
    assert response.headers["Content-Type"] == "image/png"
    assert response.headers["Cache-Control"] == PUBLIC_CACHE
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    ranged = api.client.get(
        f"/api/public/files/{record['id']}/download", headers={"Range": "bytes=0-7"}
    )
    assert ranged.status_code == 206 and ranged.data == data[:8]


def test_embargoed_download_is_403(api: Api, records):
    response = api.client.get(f"/api/public/files/{records['embargoed']['id']}/download")
    assert response.status_code == 403
    assert response.headers["Cache-Control"] == PUBLIC_CACHE
    assert "message" in response.get_json()


def test_public_endpoints_ignore_tokens_and_stay_read_only(api: Api, alice: Account, records):
    rid = records["released"]["id"]
    assert api.client.get("/api/public/files", headers=alice.auth).status_code == 200
    for method in ("post", "patch", "delete", "put"):
        response = getattr(api.client, method)(f"/api/public/files/{rid}", headers=alice.auth)
        assert response.status_code == 405
        assert response.headers["Cache-Control"] == PUBLIC_CACHE
    assert api.row(rid) is not None


def test_availability_follows_changes(api: Api, alice: Account):
    record = api.create(alice, "x.pdf")
    url = f"/api/public/files/{record['id']}"
    assert api.client.get(url).status_code == 200
    api.patch(record["id"], alice, {"freigabe": False})
    assert api.client.get(url).status_code == 404
    assert api.client.get(url + "/download").status_code == 404
    api.patch(record["id"], alice, {"freigabe": True, "sperrfrist": "2999-01-01"})
    assert api.client.get(url).status_code == 200
    assert api.client.get(url + "/download").status_code == 403
    api.patch(record["id"], alice, {"sperrfrist": None})
    assert api.client.get(url + "/download").status_code == 200
