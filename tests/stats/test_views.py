"""Views of a record's landing page (COUNTER investigations): counted by the download rules
but apart from the downloads, shown on the page, in the item report."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from typing import Any

from flask import Flask
from lxml import html

from app.files import access
from tests.links.test_links import record_link, secret_of
from tests.stats.conftest import Clock
from tests.stats.test_counting import BROWSER, CURL, GOOGLEBOT, flush, public_download, stats
from tests.support.api import Account, Api

OTHER_BROWSER = {"User-Agent": BROWSER["User-Agent"] + " other"}


def view(api: Api, record_id: str, headers: dict[str, str] = BROWSER, **kwargs: Any) -> Any:
    return api.client.get(f"/records/{record_id}", headers=headers, **kwargs)


def reach_text(api: Api, record_id: str, **kwargs: Any) -> str:
    document = html.fromstring(view(api, record_id, **kwargs).get_data())
    return document.xpath("string(//dd[@class='reach'])")


def test_page_views_count_by_the_double_click_rule_apart_from_downloads(
    app: Flask, api: Api, alice: Account, clock: Clock
) -> None:
    record = api.create(alice)
    for _ in range(3):
        assert view(api, record["id"]).status_code == 200
        clock.advance(3)
    # The same visitor downloads within the 30 s: a download, not hidden by the views.
    assert public_download(api, record["id"]).status_code == 200
    flush(app)
    answer = stats(api, alice, record["id"])
    assert (answer["total"], answer["unique"], answer["views"], answer["unique_views"]) == (
        1,
        1,
        1,
        1,
    )
    assert answer["doors"] == {"public": 1, "account": 0, "link": 0}
    clock.advance(31)
    assert view(api, record["id"]).status_code == 200
    assert view(api, record["id"], headers=OTHER_BROWSER).status_code == 200
    flush(app)
    answer = stats(api, alice, record["id"])
    assert (answer["total"], answer["views"], answer["unique_views"]) == (1, 3, 2)


def test_robots_unknown_ids_and_unreleased_records_count_no_view(
    app: Flask, api: Api, alice: Account, clock: Clock
) -> None:
    record = api.create(alice)
    hidden = api.create(alice, freigabe="false")
    assert view(api, record["id"], headers=GOOGLEBOT).status_code == 200
    assert view(api, hidden["id"]).status_code == 404
    flush(app)
    assert stats(api, alice, record["id"])["views"] == 0
    assert stats(api, alice, hidden["id"])["views"] == 0


def test_a_revalidated_page_counts_and_the_page_shows_the_reach(
    app: Flask, api: Api, alice: Account, clock: Clock
) -> None:
    record = api.create(alice)
    first = view(api, record["id"])
    assert "0 Downloads, 0 Aufrufe dieser Seite" in reach_text(api, record["id"])
    clock.advance(40)
    cached = view(api, record["id"], headers={**BROWSER, "If-None-Match": first.headers["ETag"]})
    assert cached.status_code == 304
    public_download(api, record["id"])
    flush(app)
    # Two views (the first, and the 304 40 s later; the reach_text read fell within 30 s).
    assert stats(api, alice, record["id"])["views"] == 2
    assert reach_text(api, record["id"]) == "1 Download, 2 Aufrufe dieser Seite"
    assert reach_text(api, record["id"], query_string={"lang": "en"}) == (
        "1 download, 2 views of this page"
    )
    # The counts changed: the page is a new version, not a 304.
    again = view(api, record["id"], headers={**BROWSER, "If-None-Match": first.headers["ETag"]})
    assert again.status_code == 200


def test_views_rank_and_enter_the_item_report(
    app: Flask, api: Api, alice: Account, admin: Account, clock: Clock, runner
) -> None:
    record = api.create(alice, titel="Gelesen")
    view(api, record["id"])
    view(api, record["id"], headers=OTHER_BROWSER)
    public_download(api, record["id"])
    flush(app)
    ranked = api.get("/api/stats", admin, query_string={"from": "2026-11-01"}).get_json()
    assert [(r["id"], r["total"], r["views"]) for r in ranked["data"]] == [(record["id"], 1, 2)]
    result = runner.invoke(args=["stats", "export", "--month", "2026-11"])
    rows = list(csv.reader(io.StringIO(result.output)))[1:]
    assert rows == [
        [record["id"], "Gelesen", "Total_Item_Investigations", "2026-11", "3"],
        [record["id"], "Gelesen", "Total_Item_Requests", "2026-11", "1"],
        [record["id"], "Gelesen", "Unique_Item_Requests", "2026-11", "1"],
    ]


def test_the_page_the_statistics_and_the_ranking_count_people_alike(
    app: Flask, api: Api, alice: Account, admin: Account, clock: Clock
) -> None:
    """One rule of what people asked for (app/stats/queries.py, `human`): robots count
    nothing, machines apart, a repeat within 30 s once; the record page's reach shows what
    the record's statistics and the ranking show."""
    record = api.create(alice)
    for headers in (BROWSER, BROWSER, GOOGLEBOT, CURL, OTHER_BROWSER):
        assert public_download(api, record["id"], headers).status_code == 200
        assert view(api, record["id"], headers=headers).status_code == 200
        clock.advance(5)
    flush(app)
    answer = stats(api, alice, record["id"])
    assert (answer["total"], answer["machine"], answer["views"]) == (2, 1, 2)
    ranked = api.get("/api/stats", admin, query_string={"from": "2026-11-01"}).get_json()
    assert [(r["id"], r["total"], r["machine"], r["views"]) for r in ranked["data"]] == [
        (record["id"], 2, 1, 2)
    ]
    assert reach_text(api, record["id"]) == "2 Downloads, 2 Aufrufe dieser Seite"


def test_an_embargoed_page_shows_no_reach_while_the_owner_sees_the_share_link_downloads(
    app: Flask, api: Api, alice: Account, clock: Clock, monkeypatch: Any
) -> None:
    """A journalist's download through a share link before the embargo ends is the owner's to
    know: the public page shows no reach until the content is public too, and then only the
    public's downloads (tests/stats/test_delivered.py)."""
    until = datetime.now(UTC).date() + timedelta(days=3)
    record = api.create(alice, sperrfrist=until.isoformat())
    link = record_link(api, alice, record["id"]).get_json()
    shared = api.client.get(
        f"/api/shared/{secret_of(link)}/files/{record['id']}/download", headers=BROWSER
    )
    assert shared.status_code == 200
    flush(app)
    assert stats(api, alice, record["id"])["doors"] == {"public": 0, "account": 0, "link": 1}
    for language in ("de", "en"):
        document = html.fromstring(view(api, record["id"], query_string={"lang": language}).data)
        assert document.xpath("//dd[@class='reach']") == []
        assert "Download" not in document.xpath("string(//dl[@class='details'])")
    assert api.client.get(f"/api/public/files/{record['id']}/stats").status_code == 404
    monkeypatch.setattr(access, "today", lambda: until)
    assert reach_text(api, record["id"]).startswith("0 Downloads, ")
    public = api.client.get(f"/api/public/files/{record['id']}/stats")
    assert public.status_code == 200 and public.get_json()["total"] == 0
