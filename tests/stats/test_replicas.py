"""Two processes on one database: their counts add up, and a visitor is unique once a day."""

from __future__ import annotations

import uuid

import pytest

from tests.stats.conftest import Clock
from tests.stats.test_counting import BROWSER
from tests.support.api import Api

pytestmark = pytest.mark.postgres


def test_two_replicas_sum(replicas, clock: Clock) -> None:
    a = replicas.app(STATS_CLOCK=clock)
    b = replicas.app(STATS_CLOCK=clock)
    api = Api(a, a.test_client())
    alice = api.account("alice@example.org")
    record = api.create(alice)
    download = f"/api/public/files/{record['id']}/download"
    for app, agent in ((a, "one"), (b, "two"), (b, "one")):
        headers = {"User-Agent": f"{BROWSER['User-Agent']} {agent}"}
        assert app.test_client().get(download, headers=headers).status_code == 200
    clock.advance(60)
    headers = {"User-Agent": f"{BROWSER['User-Agent']} one"}
    assert a.test_client().get(download, headers=headers).status_code == 200
    assert b.extensions["stats"].flush() == 2
    assert a.extensions["stats"].flush() == 2
    answer = api.get(f"/api/files/{record['id']}/stats", alice).get_json()
    # Visitor "one" on both replicas within 30 s: per process, so twice; once a day unique.
    assert (answer["total"], answer["unique"]) == (4, 2)


def test_with_redis_the_double_click_rule_spans_replicas(
    replicas, clock: Clock, redis_url: str
) -> None:
    shared = {
        "STATS_CLOCK": clock,
        "STATS_REDIS_URL": redis_url,
        "RATELIMIT_KEY_PREFIX": f"stats-test-{uuid.uuid4().hex}",
    }
    a, b = replicas.app(**shared), replicas.app(**shared)
    api = Api(a, a.test_client())
    alice = api.account("alice@example.org")
    record = api.create(alice)
    download = f"/api/public/files/{record['id']}/download"
    assert a.test_client().get(download, headers=BROWSER).status_code == 200
    a.extensions["stats"].flush()
    clock.advance(10)
    assert b.test_client().get(download, headers=BROWSER).status_code == 200
    b.extensions["stats"].flush()
    clock.advance(31)
    assert a.test_client().get(download, headers=BROWSER).status_code == 200
    a.extensions["stats"].flush()
    answer = api.get(f"/api/files/{record['id']}/stats", alice).get_json()
    assert (answer["total"], answer["unique"]) == (2, 1)
