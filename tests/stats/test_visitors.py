"""Who a visitor is when a folder ZIP counts its members, and the double-click rule's edge."""

from __future__ import annotations

from flask import Flask

from tests.stats.conftest import Clock
from tests.stats.test_counting import BROWSER, flush, public_download, stats
from tests.support.api import Account, Api

SAFARI = {"User-Agent": "Safari"}


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
