"""Two processes on one database: their counts add up, and a visitor is unique once a day."""

from __future__ import annotations

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
