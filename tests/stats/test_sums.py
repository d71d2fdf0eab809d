"""Figures summed over several rows of `stats_daily`: days, doors, machines and records apart
(each row alone gives the same figure whether it is added or assigned)."""

from __future__ import annotations

from flask import Flask

from tests.stats.conftest import Clock
from tests.stats.test_counting import BROWSER, CURL, flush, public_download, stats
from tests.stats.test_views import OTHER_BROWSER, view
from tests.support.api import Account, Api

DAY = 24 * 3600


def _busy_record(api: Api, app: Flask, alice: Account, clock: Clock) -> tuple[dict, dict]:
    """On two days: two people's public downloads and page views, alice's own download, a
    script's public download; another record downloaded once."""
    record, other = api.create(alice), api.create(alice)
    for _ in range(2):
        for headers in (BROWSER, OTHER_BROWSER):
            assert public_download(api, record["id"], headers).status_code == 200
            assert view(api, record["id"], headers=headers).status_code == 200
        assert api.get(f"/api/files/{record['id']}/download", alice).status_code == 200
        assert public_download(api, record["id"], CURL).status_code == 200
        clock.advance(DAY)
    assert public_download(api, other["id"]).status_code == 200
    flush(app)
    return record, other


def test_a_records_figures_sum_its_days_doors_and_machines(
    app: Flask, api: Api, alice: Account, clock: Clock
) -> None:
    record, _ = _busy_record(api, app, alice, clock)
    answer = stats(api, alice, record["id"], **{"from": "2026-11-26", "until": "2026-11-27"})
    assert {k: answer[k] for k in ("total", "unique", "machine", "views", "unique_views")} == {
        "total": 6,
        "unique": 6,
        "machine": 2,
        "views": 4,
        "unique_views": 4,
    }
    assert answer["doors"] == {"public": 4, "account": 2, "link": 0}
    assert [p["total"] for p in answer["periods"]] == [3, 3]


def test_the_public_figures_of_a_record_are_its_own_people_at_the_public_door(
    app: Flask, api: Api, alice: Account, clock: Clock
) -> None:
    record, other = _busy_record(api, app, alice, clock)
    body = api.get(f"/api/public/files/{record['id']}/stats").get_json()
    assert {k: body[k] for k in ("total", "unique", "machine", "views", "unique_views")} == {
        "total": 4,
        "unique": 4,
        "machine": 2,
        "views": 4,
        "unique_views": 4,
    }
    assert body["doors"] == {"public": 4}
    assert api.get(f"/api/public/files/{other['id']}/stats").get_json()["total"] == 1


def test_the_ranking_counts_every_door_of_people(
    app: Flask, api: Api, alice: Account, admin: Account, clock: Clock
) -> None:
    record, other = _busy_record(api, app, alice, clock)
    body = api.get("/api/stats", admin, query_string={"sort": "-total"}).get_json()
    assert [(r["id"], r["total"], r["machine"]) for r in body["data"]] == [
        (record["id"], 6, 2),
        (other["id"], 1, 0),
    ]
