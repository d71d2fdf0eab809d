"""Who a visitor is when a single download counts: the address, not only the browser."""

from __future__ import annotations

from flask import Flask

from app.stats.events import MAX_USER_AGENT
from tests.stats.conftest import Clock
from tests.stats.test_counting import BROWSER, flush, public_download, stats
from tests.support.api import Account, Api


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


#: A browser's User-Agent, padded to a length (spaces and letters: on neither COUNTER list).
def padded(length: int) -> dict[str, str]:
    agent = BROWSER["User-Agent"] + " "
    return {"User-Agent": agent + ("a b " * length)[: length - len(agent)]}


def test_a_user_agent_is_a_machine_only_beyond_the_longest_a_browser_sends(
    app: Flask, api: Api, alice: Account, clock: Clock
) -> None:
    """Up to MAX_USER_AGENT characters a User-Agent is matched against the lists (a browser:
    a person); beyond it, it is a machine without being matched."""
    record = api.create(alice)
    for length in (MAX_USER_AGENT, MAX_USER_AGENT + 1):
        answer = public_download(api, record["id"], headers=padded(length))
        assert answer.status_code == 200
        clock.advance(60)
    flush(app)
    counted = stats(api, alice, record["id"])
    assert (counted["total"], counted["machine"]) == (1, 1)
