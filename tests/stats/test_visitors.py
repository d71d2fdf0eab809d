"""Who a visitor is, for a single download and for a folder ZIP's members, and the
double-click rule's edge."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime

from flask import Flask
from sqlalchemy import select

from app.extensions import db
from app.models import StatsSalt, StatsVisitor
from app.stats.events import PUBLIC_DOOR as PUBLIC
from app.stats.events import Download
from tests.stats.conftest import Clock
from tests.stats.test_counting import BROWSER, flush, public_download, stats
from tests.support.api import Account, Api

SAFARI = {"User-Agent": "Safari"}


def test_a_public_download_tells_visitors_apart_by_address(
    app: Flask, api: Api, alice: Account, clock: Clock
) -> None:
    record = api.create(alice)
    for address in ("192.0.2.1", "203.0.113.9"):  # the same browser at two addresses
        answer = public_download(api, record["id"], environ_base={"REMOTE_ADDR": address})
        assert answer.status_code == 200
    flush(app)
    counted = stats(api, alice, record["id"])
    assert (counted["total"], counted["unique"]) == (2, 2)
    assert counted["doors"] == {"public": 2, "account": 0, "link": 0}


def test_the_same_browser_at_the_same_address_is_one_visitor(
    app: Flask, api: Api, alice: Account, clock: Clock
) -> None:
    record = api.create(alice)
    for _ in range(2):
        answer = public_download(api, record["id"], environ_base={"REMOTE_ADDR": "192.0.2.1"})
        assert answer.status_code == 200
        clock.advance(60)
    flush(app)
    counted = stats(api, alice, record["id"])
    assert (counted["total"], counted["unique"]) == (2, 1)


def test_a_public_zip_tells_visitors_apart_by_address(
    app: Flask, api: Api, alice: Account, clock: Clock
) -> None:
    record = api.create(alice, path="kit")
    for address in ("192.0.2.1", "203.0.113.9"):  # the same browser at two addresses
        zipped = api.client.get(
            "/api/public/files.zip?path=kit",
            headers=BROWSER,
            environ_base={"REMOTE_ADDR": address},
        )
        assert zipped.status_code == 200
        zipped.get_data()
    flush(app)
    answer = stats(api, alice, record["id"])
    assert (answer["total"], answer["unique"]) == (2, 2)
    assert answer["doors"] == {"public": 2, "account": 0, "link": 0}


def test_an_accounts_zip_is_one_visitor_wherever_it_is_fetched(
    app: Flask, api: Api, alice: Account, clock: Clock
) -> None:
    record = api.create(alice, path="kit")
    for headers in (BROWSER, SAFARI):
        zipped = api.get("/api/files.zip?path=kit", alice, headers=headers)
        assert zipped.status_code == 200
        zipped.get_data()
        clock.advance(60)
    flush(app)
    answer = stats(api, alice, record["id"])
    assert (answer["total"], answer["unique"]) == (2, 1)
    assert answer["doors"] == {"public": 0, "account": 2, "link": 0}


def test_clicks_exactly_thirty_seconds_apart_are_two(
    app: Flask, api: Api, alice: Account, clock: Clock
) -> None:
    record = api.create(alice)
    assert public_download(api, record["id"]).status_code == 200
    clock.advance(30)
    assert public_download(api, record["id"]).status_code == 200
    flush(app)
    assert stats(api, alice, record["id"])["total"] == 2


def test_yesterdays_late_event_after_the_roll_over_is_rolled_over_again(
    app: Flask, api: Api, alice: Account, clock: Clock
) -> None:
    """A request that read the clock just before midnight hands its event on after the flush
    that rolled the day over: the next flush counts it on its day, and rolls the day over
    again although the batch ends with today's events, so that yesterday's salt and visitor
    rows it made do not outlive the day."""
    record = api.create(alice)
    midnight = datetime(2026, 11, 27, tzinfo=UTC).timestamp()
    clock.now = midnight + 5
    flush(app)  # today's roll-over, with nothing pending
    collector = app.extensions["stats"]
    late = Download(
        midnight - 2, uuid.UUID(record["id"]), PUBLIC, None, "192.0.2.7", BROWSER["User-Agent"]
    )
    collector.add(late)
    assert public_download(api, record["id"]).status_code == 200
    assert flush(app) == 2
    with app.app_context():
        salt_days = set(db.session.scalars(select(StatsSalt.day)))
        visitor_days = set(db.session.scalars(select(StatsVisitor.day)))
    today = date(2026, 11, 27)
    assert (salt_days, visitor_days) == ({today}, {today})
    answer = stats(api, alice, record["id"], **{"from": "2026-11-26", "until": "2026-11-27"})
    assert [(p["period"], p["total"]) for p in answer["periods"]] == [
        ("2026-11-26", 1),
        ("2026-11-27", 1),
    ]
