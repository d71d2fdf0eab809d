"""The exact instants of a link's life, on a clock the test sets: an expiry must be after
now and at most SHARE_LINK_MAX_DAYS ahead, a link is expired from its expiry instant on,
and its first use stays the first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.links import routes, services
from tests.links.test_links import kit, record_link, shared
from tests.support.api import Account, Api


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The links' clock (creating, resolving, counting uses, listing) held still."""
    clock = Clock()
    monkeypatch.setattr(services, "utcnow", clock)
    monkeypatch.setattr(routes, "utcnow", clock)
    return clock


def listed(api: Api, account: Account) -> dict[str, Any]:
    links = api.get("/api/links", account).get_json()["data"]
    assert len(links) == 1
    return links[0]


def test_an_expiry_of_exactly_now_is_refused(api: Api, alice: Account, clock: Clock) -> None:
    record = api.create(alice)
    response = record_link(api, alice, record["id"], expires_at=stamp(clock.now))
    assert response.status_code == 422
    message = "The expires_at field must be in the future."
    assert response.get_json() == {"message": message, "errors": {"expires_at": [message]}}
    assert api.get("/api/links", alice).get_json()["data"] == []


def test_an_expiry_of_exactly_the_maximum_is_allowed(
    api: Api, alice: Account, clock: Clock
) -> None:
    record = api.create(alice)
    furthest = clock.now + timedelta(days=90)
    response = record_link(api, alice, record["id"], expires_at=stamp(furthest))
    assert response.status_code == 201, response.get_json()
    assert listed(api, alice)["expires_at"] == response.get_json()["expires_at"]
    beyond = record_link(
        api, alice, record["id"], expires_at=stamp(furthest + timedelta(seconds=1))
    )
    assert beyond.status_code == 422
    message = "The expires_at field must be at most 90 days ahead."
    assert beyond.get_json() == {"message": message, "errors": {"expires_at": [message]}}


def test_a_link_at_its_expiry_instant_is_expired(api: Api, alice: Account, clock: Clock) -> None:
    record = api.create(alice)
    expires = clock.now + timedelta(hours=1)
    link = record_link(api, alice, record["id"], expires_at=stamp(expires)).get_json()
    clock.now = expires - timedelta(seconds=1)
    assert shared(api, link, f"/files/{record['id']}/download").status_code == 200
    assert listed(api, alice)["state"] == "active"
    clock.now = expires
    response = shared(api, link, f"/files/{record['id']}/download")
    assert response.status_code == 410
    assert response.get_json() == {
        "message": f"This link expired at {expires.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}."
    }
    assert listed(api, alice)["state"] == "expired"


def test_the_first_use_stays_the_first(api: Api, alice: Account, clock: Clock) -> None:
    record = api.create(alice)
    link = record_link(api, alice, record["id"]).get_json()
    first = clock.now + timedelta(minutes=1)
    clock.now = first
    assert shared(api, link, f"/files/{record['id']}/download").status_code == 200
    clock.now = first + timedelta(minutes=5)
    assert shared(api, link, f"/files/{record['id']}/download").status_code == 200
    used = listed(api, alice)
    assert used["downloads"] == 2
    assert used["first_used_at"] == first.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert used["last_used_at"] == clock.now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_a_kit_for_a_folder_with_an_underscore_reaches_that_folder_only(
    api: Api, alice: Account
) -> None:
    """`_` in a folder's name (the one SQL LIKE wildcard a path may hold) is a character: a
    kit for `presse/2026_12` does not reach `presse/2026-12`."""
    inside = api.create(alice, "in.pdf", path="presse/2026_12/teil", freigabe=0)
    api.create(alice, "daneben.pdf", path="presse/2026-12/teil", freigabe=0)
    response = kit(api, alice, "presse/2026_12")
    assert response.status_code == 201, response.get_json()
    page = shared(api, response.get_json()).get_json()
    assert ([r["id"] for r in page["data"]], page["total"]) == ([inside["id"]], 1)
