from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from app.extensions import db
from app.models import FileRecord
from tests.support.api import RECORD_FIELDS, Account, Api
from tests.support.openapi_client import OpenAPIValidatingClient


def insert_rows(api: Api, owner: Account, rows: list[dict[str, Any]]) -> list[str]:
    """Insert records directly (no objects): list tests only read metadata. Each row gives
    its `created_at` and any other columns."""
    ids = []
    with api.app.app_context():
        for columns in rows:
            record_id = uuid.uuid4()
            db.session.add(
                FileRecord(
                    **{
                        "id": record_id,
                        "user_id": owner.id,
                        "stored_path": f"files/{record_id}/seed",
                        "checksum_sha256": "0" * 64,
                        "original_name": "seed.txt",
                        "mime_type": "text/plain",
                        "size": 1,
                        "updated_at": columns["created_at"],
                        **columns,
                    }
                )
            )
            ids.append(str(record_id))
        db.session.commit()
    return ids


def seed(api: Api, owner: Account, count: int, start: datetime, **columns) -> list[str]:
    """`count` records a second apart from `start`, with the same other columns. They were
    changed a day later in the opposite order, so that ordering or filtering by `updated_at`
    instead of `created_at` shows."""
    rows = [
        {
            "created_at": start + timedelta(seconds=i),
            "updated_at": start + timedelta(days=1, seconds=count - i),
            "original_name": f"seed-{i}.txt",
            **columns,
        }
        for i in range(count)
    ]
    return insert_rows(api, owner, rows)


def listing(api: Api, account: Account, **params) -> dict:
    response = api.get("/api/files", account, query_string=params)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def test_user_sees_own_records_admin_sees_all(
    api: Api, alice: Account, bob: Account, admin: Account
):
    mine = api.create(alice, "mine.pdf")
    theirs = api.create(bob, "theirs.pdf")

    alice_list = listing(api, alice)
    assert [r["id"] for r in alice_list["data"]] == [mine["id"]]
    assert list(alice_list["data"][0]) == RECORD_FIELDS
    assert {r["id"] for r in listing(api, admin)["data"]} == {mine["id"], theirs["id"]}


def test_envelope_of_an_empty_list(api: Api, alice: Account):
    body = listing(api, alice)
    assert body == {
        "data": [],
        "current_page": 1,
        "per_page": 100,
        "total": 0,
        "last_page": 1,
        "from": None,
        "to": None,
        "first_page_url": "http://localhost/api/files?page=1",
        "last_page_url": "http://localhost/api/files?page=1",
        "next_page_url": None,
        "prev_page_url": None,
        "path": "http://localhost/api/files",
        "next_cursor": None,
    }


def test_pages_of_one_hundred_newest_first(api: Api, alice: Account):
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ids = seed(api, alice, 205, start)
    newest_first = list(reversed(ids))

    page1 = listing(api, alice)
    assert [r["id"] for r in page1["data"]] == newest_first[:100]
    assert (page1["total"], page1["last_page"], page1["from"], page1["to"]) == (205, 3, 1, 100)
    assert page1["prev_page_url"] is None
    assert page1["next_page_url"] == "http://localhost/api/files?page=2"

    page2 = listing(api, alice, page=2)
    assert page2["prev_page_url"] == "http://localhost/api/files?page=1"
    assert page2["next_page_url"] == "http://localhost/api/files?page=3"

    page3 = listing(api, alice, page=3)
    assert [r["id"] for r in page3["data"]] == newest_first[200:]
    assert (page3["from"], page3["to"], page3["next_page_url"]) == (201, 205, None)
    assert page3["prev_page_url"] == "http://localhost/api/files?page=2"

    beyond = listing(api, alice, page=4)
    assert beyond["data"] == [] and beyond["from"] is None and beyond["total"] == 205


def test_pages_follow_the_configured_page_size(make_sqlite_app):
    """Every other test lists 100 a page, the default: here the setting must be what counts."""
    app = make_sqlite_app(PAGE_SIZE=3)
    app.test_client_class = OpenAPIValidatingClient  # pages must add up (check_page_envelope)
    small = Api(app, app.test_client())
    owner = small.account("owner@example.org")
    ids = list(reversed(seed(small, owner, 7, datetime(2026, 1, 1, tzinfo=UTC))))
    pages = [listing(small, owner, page=n) for n in (1, 2, 3)]
    assert [[r["id"] for r in p["data"]] for p in pages] == [ids[:3], ids[3:6], ids[6:]]
    assert {(p["per_page"], p["total"], p["last_page"]) for p in pages} == {(3, 7, 3)}
    assert [r["id"] for r in listing(small, owner, cursor="")["data"]] == ids[:3]


def test_equal_timestamps_are_ordered_by_id_descending(api: Api, alice: Account):
    moment = datetime(2026, 3, 1, tzinfo=UTC)
    ids = seed(api, alice, 3, moment) + seed(api, alice, 3, moment)
    same = [i for i in ids]
    body = listing(api, alice)
    listed = [r["id"] for r in body["data"]]
    # Rows 0 and 3, 1 and 4, 2 and 5 share their created_at.
    for a, b in ((0, 3), (1, 4), (2, 5)):
        pair = [i for i in listed if i in (same[a], same[b])]
        assert pair == sorted(pair, reverse=True)


def test_page_urls_keep_the_other_query_parameters(api: Api, alice: Account):
    seed(api, alice, 150, datetime(2026, 1, 1, tzinfo=UTC), path="x/y")
    body = listing(api, alice, path="x", page=1)
    query = parse_qs(urlsplit(body["next_page_url"]).query)
    assert query == {"path": ["x"], "page": ["2"]}


def test_page_urls_keep_repeated_parameters_and_carry_one_cursor(make_sqlite_app):
    app = make_sqlite_app(PAGE_SIZE=3)
    small = Api(app, app.test_client())
    owner = small.account("owner@example.org")
    seed(small, owner, 7, datetime(2026, 1, 1, tzinfo=UTC))
    repeated = [("aktiv_id", "1"), ("aktiv_id", "2"), ("page", "1")]
    body = small.get("/api/files", owner, query_string=repeated).get_json()
    assert parse_qs(urlsplit(body["first_page_url"]).query) == {
        "aktiv_id": ["1", "2"],
        "page": ["1"],
    }
    second = listing(small, owner, cursor=listing(small, owner, cursor="")["next_cursor"])
    query = parse_qs(urlsplit(second["next_page_url"]).query)
    assert query == {"cursor": [second["next_cursor"]]}


@pytest.mark.parametrize("page", ["0", "-1", "abc", "1.5"])
def test_invalid_page_is_422(api: Api, alice: Account, page: str):
    response = api.get("/api/files", alice, query_string={"page": page})
    assert response.status_code == 422
    assert list(response.get_json()["errors"]) == ["page"]


def test_path_filter_is_a_literal_prefix(api: Api, alice: Account):
    start = datetime(2026, 1, 1, tzinfo=UTC)
    a = seed(api, alice, 1, start, path="reports/2025/q1")
    b = seed(api, alice, 1, start, path="reports/2025")
    seed(api, alice, 1, start, path="other/reports")
    seed(api, alice, 1, start, path="reportsX")
    seed(api, alice, 1, start, path=None)
    c = seed(api, alice, 1, start, path="pct_%/a")
    seed(api, alice, 1, start, path="pctXY/a")

    assert {r["id"] for r in listing(api, alice, path="reports/")["data"]} == set(a + b)
    assert {r["id"] for r in listing(api, alice, path="reports/2025/")["data"]} == set(a)
    assert {r["id"] for r in listing(api, alice, path="reports/2025")["data"]} == set(a + b)
    assert {r["id"] for r in listing(api, alice, path="pct_%")["data"]} == set(c)
    assert {r["id"] for r in listing(api, alice, path="pct_")["data"]} == set(c)
    assert listing(api, alice, path="pct%")["data"] == []
    assert listing(api, alice, path="pct\\X")["data"] == []  # a backslash is literal too


def test_exact_filters_and_their_combination(api: Api, alice: Account):
    start = datetime(2026, 1, 1, tzinfo=UTC)
    hit = seed(api, alice, 1, start, aktiv_id="A-1", reprotyp="Scan", freigabe=False)
    seed(api, alice, 1, start, aktiv_id="A-1", reprotyp="Scan", freigabe=True)
    seed(api, alice, 1, start, aktiv_id="A-10", reprotyp="Scan", freigabe=False)
    seed(api, alice, 1, start, aktiv_id="A-1", reprotyp="Original", freigabe=False)

    assert len(listing(api, alice, aktiv_id="A-1")["data"]) == 3
    assert len(listing(api, alice, reprotyp="Scan")["data"]) == 3
    assert len(listing(api, alice, freigabe="0")["data"]) == 3
    assert len(listing(api, alice, freigabe="1")["data"]) == 1
    combined = listing(api, alice, aktiv_id="A-1", reprotyp="Scan", freigabe="0")
    assert [r["id"] for r in combined["data"]] == hit


@pytest.mark.parametrize("value", ["true", "2", "yes"])
def test_invalid_freigabe_filter_is_422(api: Api, alice: Account, value: str):
    response = api.get("/api/files", alice, query_string={"freigabe": value})
    assert response.status_code == 422
    assert list(response.get_json()["errors"]) == ["freigabe"]


def test_unknown_parameters_and_empty_values_are_ignored(api: Api, alice: Account):
    seed(api, alice, 2, datetime(2026, 1, 1, tzinfo=UTC))
    body = listing(api, alice, foo="bar", path="", aktiv_id="")
    assert body["total"] == 2


@pytest.mark.parametrize(
    "since,expected",
    [
        ("2026-01-01T10:00:00Z", 2),
        ("2026-01-01T10:00:00", 2),
        ("2026-01-01T10:00:00.000001Z", 1),
        ("2026-01-01T10:00", 2),
        ("2026-01-01T11:00:00+01:00", 2),
        ("2026-01-01T11:00:00+0100", 2),
        ("2026-01-01T11:00:00 01:00", 2),
        ("2026-01-01T09:00:01-01:00", 1),
        ("2026-01-01T09:00:00-02:00", 0),
        ("2026-01-01", 3),
        ("2026-01-02", 0),
    ],
)
def test_since_is_inclusive_and_understands_offsets(
    api: Api, alice: Account, since: str, expected: int
):
    seed(api, alice, 1, datetime(2026, 1, 1, 9, 0, tzinfo=UTC))
    seed(api, alice, 1, datetime(2026, 1, 1, 10, 0, tzinfo=UTC))
    seed(api, alice, 1, datetime(2026, 1, 1, 10, 0, 1, tzinfo=UTC))
    assert listing(api, alice, since=since)["total"] == expected


def test_since_with_an_encoded_plus_sign(api: Api, alice: Account):
    seed(api, alice, 1, datetime(2026, 1, 1, 10, 0, tzinfo=UTC))
    response = api.client.get("/api/files?since=2026-01-01T11:00:00%2B01:00", headers=alice.auth)
    assert response.get_json()["total"] == 1
    response = api.client.get("/api/files?since=2026-01-01T11:00:01%2B01:00", headers=alice.auth)
    assert response.get_json()["total"] == 0


@pytest.mark.parametrize(
    "since", ["yesterday", "2026-13-01", "2026-01-01T25:00", "2026-01-01T10:00+25:00", "1"]
)
def test_invalid_since_is_422(api: Api, alice: Account, since: str):
    response = api.get("/api/files", alice, query_string={"since": since})
    assert response.status_code == 422
    assert list(response.get_json()["errors"]) == ["since"]


def follow_cursors(api: Api, account: Account, **params) -> list[list[str]]:
    pages, cursor = [], ""
    while cursor is not None:
        body = listing(api, account, cursor=cursor, **params)
        assert set(body) == {"data", "path", "per_page", "next_cursor", "next_page_url"}
        assert body["path"] == "http://localhost/api/files" and body["per_page"] == 100
        pages.append([r["id"] for r in body["data"]])
        cursor = body["next_cursor"]
        assert (body["next_page_url"] is None) == (cursor is None)
    return pages


def test_keyset_pagination_walks_every_record_once_in_order(api: Api, alice: Account):
    ids = seed(api, alice, 205, datetime(2026, 1, 1, tzinfo=UTC))
    pages = follow_cursors(api, alice)
    assert [len(p) for p in pages] == [100, 100, 5]
    assert [i for page in pages for i in page] == list(reversed(ids))


def test_keyset_pages_end_where_the_records_end(api: Api, alice: Account):
    ids = list(reversed(seed(api, alice, 200, datetime(2026, 1, 1, tzinfo=UTC))))
    pages = follow_cursors(api, alice)
    assert pages == [ids[:100], ids[100:]]  # no empty third page
    assert listing(api, alice, page=2)["next_cursor"] is None


def test_keyset_pagination_with_equal_timestamps_and_filters(api: Api, alice: Account):
    moment = datetime(2026, 2, 1, tzinfo=UTC)
    same = [seed(api, alice, 1, moment, path="x/y")[0] for _ in range(150)]
    seed(api, alice, 20, moment, path="other")
    walked = [i for page in follow_cursors(api, alice, path="x/") for i in page]
    assert walked == sorted(same, reverse=True)
    first = listing(api, alice, cursor="", path="x/")
    query = parse_qs(urlsplit(first["next_page_url"]).query)
    assert query["path"] == ["x/"] and query["cursor"] == [first["next_cursor"]]


def test_a_numbered_page_tells_where_keyset_paging_continues(api: Api, alice: Account):
    ids = list(reversed(seed(api, alice, 150, datetime(2026, 1, 1, tzinfo=UTC))))
    page1 = listing(api, alice, page=1)
    rest = listing(api, alice, cursor=page1["next_cursor"])
    assert [r["id"] for r in rest["data"]] == ids[100:]
    assert rest["next_cursor"] is None
    assert listing(api, alice, page=2)["next_cursor"] is None


@pytest.mark.parametrize("cursor", ["nonsense", "!!", "MjAyNi0wMS0wMVQwMDowMDowMHx4"])
def test_invalid_cursor_is_422(api: Api, alice: Account, cursor: str):
    response = api.get("/api/files", alice, query_string={"cursor": cursor})
    assert response.status_code == 422
    assert list(response.get_json()["errors"]) == ["cursor"]


def test_public_keyset_pagination_shows_released_records_only(api: Api, alice: Account):
    released = seed(api, alice, 120, datetime(2026, 1, 1, tzinfo=UTC))
    seed(api, alice, 30, datetime(2026, 1, 2, tzinfo=UTC), freigabe=False)
    cursor, seen = "", []
    while cursor is not None:
        body = api.client.get("/api/public/files", query_string={"cursor": cursor}).get_json()
        seen += [r["id"] for r in body["data"]]
        cursor = body["next_cursor"]
    assert seen == list(reversed(released))
