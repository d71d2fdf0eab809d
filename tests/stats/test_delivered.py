"""Counts are of what was delivered and what the public may know (issue 36, findings 3, 9
and 10): a 304 counts nothing, a folder ZIP counts a member once its bytes were handed on,
share-link downloads never reach the public figures, and a User-Agent of any length costs
the flush a bounded amount of matching."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import counter_robots
import pytest
from flask import Flask
from flask.testing import FlaskClient
from lxml import html
from werkzeug.test import EnvironBuilder

from app.archives import services as archives
from app.files import access
from app.stats import aggregation
from app.stats.events import MAX_USER_AGENT
from tests.links.test_links import kit, record_link, secret_of
from tests.stats.conftest import Clock
from tests.stats.test_counting import BROWSER, flush, public_download, stats
from tests.support.api import Account, Api


def test_a_304_counts_no_download(app: Flask, api: Api, alice: Account, clock: Clock) -> None:
    record = api.create(alice)
    etag = public_download(api, record["id"]).headers["ETag"]
    for _ in range(5):
        clock.advance(60)
        revalidated = public_download(api, record["id"], {**BROWSER, "If-None-Match": etag})
        assert revalidated.status_code == 304
    flush(app)
    answer = stats(api, alice, record["id"])
    assert (answer["total"], answer["unique"]) == (1, 1)


def _folder(api: Api, alice: Account) -> list[dict[str, Any]]:
    sizes = (5000, 7000, 9000)
    return [
        api.create(alice, f"teil{n}.txt", str(n).encode() * size, path="kit/2026")
        for n, size in enumerate(sizes)
    ]


def _totals(api: Api, alice: Account, records: list[dict[str, Any]]) -> list[int]:
    return [stats(api, alice, record["id"])["total"] for record in records]


def _headers_only(app: Flask, url: str, **query: str) -> tuple[str, dict[str, str]]:
    """The app's answer up to its headers, as a server has it before the body: the body is
    closed without a byte of it taken (the test client would take a first chunk)."""
    answer: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        answer.update(status=status, headers=dict(headers))

    environ = EnvironBuilder(path=url, query_string=query, headers=BROWSER).get_environ()
    body = app.wsgi_app(environ, start_response)
    body.close()
    return answer["status"], answer["headers"]


def test_a_folder_zip_closed_after_its_headers_counts_nothing(
    app: Flask, api: Api, alice: Account
) -> None:
    records = _folder(api, alice)
    status, headers = _headers_only(app, "/api/public/files.zip", path="kit/2026")
    assert (status, headers["Content-Type"]) == ("200 OK", "application/zip")
    assert flush(app) == 0
    assert _totals(api, alice, records) == [0, 0, 0]


def test_a_folder_zip_counts_the_members_whose_bytes_were_handed_on(
    app: Flask, api: Api, alice: Account, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks of 1 KiB: the reader takes the first 8 KiB (the manifest and the first member,
    5,000 bytes), then leaves; a second reader takes all."""
    records = _folder(api, alice)
    monkeypatch.setattr(archives, "CHUNK_BYTES", 1024)
    client = FlaskClient(app)
    response = client.get(
        "/api/public/files.zip", query_string={"path": "kit/2026"}, headers=BROWSER, buffered=False
    )
    length = int(response.headers["Content-Length"])
    chunks = iter(response.response)
    received = 0
    while received < 8 * 1024:
        received += len(next(chunks))
    response.close()
    flush(app)
    assert _totals(api, alice, records) == [1, 0, 0]
    clock.advance(60)
    whole = client.get("/api/public/files.zip", query_string={"path": "kit/2026"}, headers=BROWSER)
    assert len(whole.get_data()) == length
    flush(app)
    assert _totals(api, alice, records) == [2, 1, 1]


def test_a_share_links_zip_counts_on_the_link_door_as_it_streams(
    app: Flask, api: Api, alice: Account
) -> None:
    records = _folder(api, alice)
    link = kit(api, alice, "kit/2026").get_json()
    client = FlaskClient(app)
    url = f"/api/shared/{secret_of(link)}/files.zip"
    assert _headers_only(app, url)[0] == "200 OK"
    assert flush(app) == 0
    assert len(client.get(url, headers=BROWSER).get_data()) > 21000
    flush(app)
    assert [stats(api, alice, r["id"])["doors"]["link"] for r in records] == [1, 1, 1]


def _reach(api: Api, record_id: str) -> str:
    document = html.fromstring(api.client.get(f"/records/{record_id}", headers=BROWSER).data)
    return document.xpath("string(//dd[@class='reach'])")


def test_what_the_press_fetched_under_embargo_never_shows_publicly(
    app: Flask, api: Api, alice: Account, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    until = datetime.now(UTC).date() + timedelta(days=3)
    record = api.create(alice, sperrfrist=until.isoformat())
    link = record_link(api, alice, record["id"]).get_json()
    for n in range(3):  # three journalists
        headers = {"User-Agent": f"{BROWSER['User-Agent']} press/{n}"}
        shared = api.client.get(
            f"/api/shared/{secret_of(link)}/files/{record['id']}/download", headers=headers
        )
        assert shared.status_code == 200
    flush(app)
    monkeypatch.setattr(access, "today", lambda: until)
    clock.advance(60)
    assert public_download(api, record["id"]).status_code == 200
    flush(app)
    public = api.client.get(f"/api/public/files/{record['id']}/stats")
    assert public.status_code == 200
    answer = public.get_json()
    assert (answer["total"], answer["unique"], answer["doors"]) == (1, 1, {"public": 1})
    assert _reach(api, record["id"]).startswith("1 Download, ")
    # The owner sees every door.
    owner = stats(api, alice, record["id"])
    assert (owner["total"], owner["doors"]) == (4, {"public": 1, "account": 0, "link": 3})


def _forget_classifications() -> None:
    aggregation._machine_or_robot.cache_clear()  # type: ignore[attr-defined]


class _Matches:
    """The characters the COUNTER lists are matched against, call by call."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lengths: list[int] = []
        for name in ("is_machine", "is_robot"):
            original = getattr(counter_robots, name)
            monkeypatch.setattr(aggregation, name, self._counting(original))
        _forget_classifications()

    def _counting(self, original: Any) -> Any:
        def match(user_agent: str) -> bool:
            self.lengths.append(len(user_agent))
            return original(user_agent)

        return match


def test_a_long_user_agent_costs_no_more_matching_than_a_short_one_and_counts_as_a_machine(
    app: Flask, api: Api, alice: Account, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    matches = _Matches(monkeypatch)
    record = api.create(alice)
    for n in range(20):  # distinct 200 KB User-Agents, each a new visitor
        agent = f"Mozilla/5.0 {n} " + "x" * 200_000
        assert public_download(api, record["id"], {"User-Agent": agent}).status_code == 200
        clock.advance(1)
    pending = app.extensions["stats"].pending
    assert max(len(event.user_agent) for event in pending) == MAX_USER_AGENT + 1
    flush(app)
    assert matches.lengths == []  # none matched at all
    answer = stats(api, alice, record["id"])
    assert (answer["total"], answer["machine"]) == (0, 20)
    # A browser's agent is matched (once for many requests); one at the limit is matched too.
    at_limit = "Mozilla/5.0 " + "y" * (MAX_USER_AGENT - 12)
    for headers in (BROWSER, BROWSER, {"User-Agent": at_limit}):
        clock.advance(60)
        assert public_download(api, record["id"], headers).status_code == 200
    flush(app)
    assert max(matches.lengths) == MAX_USER_AGENT
    assert len(matches.lengths) == 4  # both lists, once per distinct agent
    answer = stats(api, alice, record["id"])
    assert (answer["total"], answer["machine"]) == (3, 20)


def test_the_flush_takes_no_longer_for_long_user_agents_than_for_short_ones(
    app: Flask, api: Api, alice: Account, clock: Clock
) -> None:
    """Relative, generous: 50 distinct 200 KB agents against 50 distinct browser agents
    (unbounded, the long ones took about 400 times as long)."""
    record = api.create(alice)

    def flush_time(agent: str) -> float:
        _forget_classifications()
        for n in range(50):
            headers = {"User-Agent": agent.format(n=n), "X-Forwarded-For": f"198.51.100.{n}"}
            assert public_download(api, record["id"], headers).status_code == 200
        clock.advance(60)
        start = time.perf_counter()
        assert flush(app) == 50
        return time.perf_counter() - start

    short = min(flush_time(BROWSER["User-Agent"] + " {n}") for _ in range(2))
    long = min(flush_time("Mozilla/5.0 {n} " + "x" * 200_000) for _ in range(2))
    assert long < 3 * short
