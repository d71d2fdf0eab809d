"""What counts as a download (COUNTER R5), with a clock the test moves and flushes it makes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, make_url, select
from sqlalchemy.exc import OperationalError

from app import create_app
from app.extensions import db
from app.models import StatsDaily, StatsSalt, StatsVisitor
from app.stats import aggregation
from app.stats.events import MAX_USER_AGENT
from tests.stats.conftest import Clock
from tests.support.api import Account, Api

BROWSER = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"}
GOOGLEBOT = {
    "User-Agent": "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
}
CURL = {"User-Agent": "curl/8.5.0"}


def flush(app: Flask) -> int:
    return app.extensions["stats"].flush()


def stats(api: Api, account: Account, record_id: str, **params: str) -> dict[str, Any]:
    response = api.get(f"/api/files/{record_id}/stats", account, query_string=params)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def public_download(api: Api, record_id: str, headers: dict[str, str] = BROWSER, **kw: Any):
    return api.get(f"/api/public/files/{record_id}/download", headers=headers, **kw)


def rows_of(app: Flask, model: Any) -> int:
    with app.app_context():
        return db.session.execute(select(func.count()).select_from(model)).scalar_one()


def test_the_double_click_rule(app: Flask, api: Api, alice: Account, clock: Clock) -> None:
    record = api.create(alice)
    for _ in range(3):
        assert public_download(api, record["id"]).status_code == 200
        clock.advance(5)
    flush(app)
    assert stats(api, alice, record["id"])["total"] == 1
    clock.advance(31 - 5)  # 31 s after the third download
    assert public_download(api, record["id"]).status_code == 200
    flush(app)
    answer = stats(api, alice, record["id"])
    assert (answer["total"], answer["unique"], answer["machine"]) == (2, 1, 0)
    assert answer["doors"] == {"public": 2, "account": 0, "link": 0}
    assert answer["periods"][-1] == {
        "period": "2026-11-26",
        **{k: answer[k] for k in ("total", "unique", "machine", "views", "unique_views", "doors")},
    }


def test_nothing_is_written_until_the_flush(app: Flask, api: Api, alice: Account) -> None:
    record = api.create(alice)
    assert public_download(api, record["id"]).status_code == 200
    assert rows_of(app, StatsDaily) == 0
    assert flush(app) == 1
    assert rows_of(app, StatsDaily) == 1


def test_robots_count_nothing_and_machines_count_apart(
    app: Flask, api: Api, alice: Account
) -> None:
    record = api.create(alice)
    assert public_download(api, record["id"], GOOGLEBOT).status_code == 200
    flush(app)
    answer = stats(api, alice, record["id"])
    assert (answer["total"], answer["machine"]) == (0, 0)
    assert public_download(api, record["id"], CURL).status_code == 200
    flush(app)
    answer = stats(api, alice, record["id"])
    assert (answer["total"], answer["unique"], answer["machine"]) == (0, 0, 1)


def padded(length: int) -> dict[str, str]:
    """A browser's User-Agent padded to `length` (spaces and letters: on neither COUNTER list)."""
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


def test_a_players_range_requests_count_once(
    app: Flask, api: Api, alice: Account, clock: Clock
) -> None:
    record = api.create(alice)
    for n in range(50):
        headers = {**BROWSER, "Range": f"bytes={n}-{n + 9}"}
        assert public_download(api, record["id"], headers).status_code == 206
        clock.advance(2)
    flush(app)
    assert stats(api, alice, record["id"])["total"] == 1


def test_refused_answers_count_nothing(
    app: Flask, api: Api, alice: Account, bob: Account, clock: Clock
) -> None:
    hidden = api.create(alice, freigabe="false")
    shown = api.create(alice)
    assert api.get(f"/api/files/{hidden['id']}/download", bob).status_code == 404
    assert public_download(api, hidden["id"]).status_code == 404
    blocked = api.create(alice, sperrfrist="2099-01-01")
    assert public_download(api, blocked["id"]).status_code == 403
    unsatisfiable = {**BROWSER, "Range": "bytes=999999-"}
    assert public_download(api, shown["id"], unsatisfiable).status_code == 416
    # HEAD is answered (by Flask, undocumented) but hands out nothing.
    with FlaskClient(app).head(f"/api/public/files/{shown['id']}/download") as head:
        assert head.status_code == 200
    assert flush(app) == 0
    assert rows_of(app, StatsDaily) == 0
    etag = public_download(api, shown["id"]).headers["ETag"]
    clock.advance(60)
    revalidated = public_download(api, shown["id"], {**BROWSER, "If-None-Match": etag})
    assert revalidated.status_code == 304  # the client keeps its copy: nothing handed out
    flush(app)
    assert stats(api, alice, shown["id"])["total"] == 1


def test_accounts_are_visitors_and_doors_are_apart(
    app: Flask, api: Api, alice: Account, bob: Account, clock: Clock
) -> None:
    record = api.create(alice)
    assert api.get(f"/api/files/{record['id']}/download", alice).status_code == 200
    # Another address and browser, the same account: the same visitor, so one request.
    other = {"User-Agent": "Safari", "X-Forwarded-For": "203.0.113.9"}
    assert api.get(f"/api/files/{record['id']}/download", alice, headers=other).status_code == 200
    clock.advance(40)
    assert api.get(f"/api/files/{record['id']}/download", alice).status_code == 200
    assert public_download(api, record["id"]).status_code == 200
    flush(app)
    answer = stats(api, alice, record["id"])
    assert (answer["total"], answer["unique"]) == (3, 2)
    assert answer["doors"] == {"public": 1, "account": 2, "link": 0}


def test_a_zip_of_three_files_counts_three(app: Flask, api: Api, alice: Account) -> None:
    ids = [api.create(alice, f"r{n}.pdf", path="reports/2026")["id"] for n in range(3)]
    response = api.get("/api/public/files.zip", headers=BROWSER, query_string={"path": "reports"})
    assert response.status_code == 200
    flush(app)
    assert [stats(api, alice, i)["doors"]["public"] for i in ids] == [1, 1, 1]


def test_nothing_per_visitor_survives_the_day(
    app: Flask, api: Api, alice: Account, clock: Clock
) -> None:
    record = api.create(alice)
    assert public_download(api, record["id"]).status_code == 200
    flush(app)
    assert (rows_of(app, StatsVisitor), rows_of(app, StatsSalt)) == (1, 1)
    clock.advance(24 * 3600)
    flush(app)  # the roll-over, with nothing pending
    assert (rows_of(app, StatsVisitor), rows_of(app, StatsSalt)) == (0, 0)
    assert app.extensions["stats"].clicks.last == {}
    # The next day the same visitor is unique again; the day's totals were kept.
    assert public_download(api, record["id"]).status_code == 200
    flush(app)
    answer = stats(api, alice, record["id"], granularity="month")
    assert (answer["total"], answer["unique"]) == (2, 2)


def test_switched_off_nothing_is_counted(
    api: Api, alice: Account, stack_config: dict[str, Any]
) -> None:
    record = api.create(alice)
    off = create_app({**stack_config, "STATS": "off"})
    try:
        download = off.test_client().get(f"/api/public/files/{record['id']}/download")
        assert download.status_code == 200
        download.close()
        assert "stats" not in off.extensions
        assert rows_of(off, StatsDaily) == 0
        answer = off.test_client().get(f"/api/files/{record['id']}/stats", headers=alice.auth)
        assert (answer.status_code, answer.get_json()["total"]) == (200, 0)
    finally:
        with off.app_context():
            db.engine.dispose()


def test_a_failed_flush_keeps_its_events_for_the_next(
    app: Flask, api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = api.create(alice)
    # An account: the same visitor on the retry (an anonymous one gets a fresh salt then).
    assert api.get(f"/api/files/{record['id']}/download", alice).status_code == 200

    def database_gone(*args: Any) -> None:
        raise OperationalError("INSERT", {}, Exception("connection lost"))

    monkeypatch.setattr(aggregation, "_add_to_daily", database_gone)
    with pytest.raises(OperationalError):
        flush(app)
    assert rows_of(app, StatsDaily) == 0
    monkeypatch.undo()
    assert flush(app) == 1
    answer = stats(api, alice, record["id"])
    assert (answer["total"], answer["unique"]) == (1, 1)


def test_downloads_through_a_share_link_count_at_the_link_door(
    app: Flask, api: Api, alice: Account, clock: Clock
) -> None:
    record = api.create(alice, freigabe="0", path="presse/2026")
    other = api.create(alice, "anhang.pdf", freigabe="0", path="presse/2026")
    expires = (datetime.now(UTC) + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    link = api.client.post(
        f"/api/files/{record['id']}/links", json={"expires_at": expires}, headers=alice.auth
    )
    kit = api.client.post(
        "/api/links", json={"path": "presse/2026", "expires_at": expires}, headers=alice.auth
    )
    assert link.status_code == 201 and kit.status_code == 201
    secret = urlsplit(link.get_json()["url"]).path.rsplit("/", 1)[1]
    kit_secret = urlsplit(kit.get_json()["url"]).path.rsplit("/", 1)[1]
    download = api.get(f"/api/shared/{secret}/files/{record['id']}/download", headers=BROWSER)
    assert download.status_code == 200
    clock.advance(40)
    assert api.get(f"/api/shared/{kit_secret}/files.zip", headers=BROWSER).status_code == 200
    flush(app)
    assert stats(api, alice, record["id"])["doors"] == {"public": 0, "account": 0, "link": 2}
    assert stats(api, alice, other["id"])["doors"] == {"public": 0, "account": 0, "link": 1}


def test_a_destroyed_salt_is_in_no_file_of_the_sqlite_database(
    make_sqlite_app: Any, clock: Clock
) -> None:
    """SQLite keeps deleted rows' bytes in free pages and in its write-ahead log until they
    are overwritten: after the roll-over the salt's 32 bytes are in neither the database file
    nor its -wal (PostgreSQL: docs/security.md, "Client addresses and the salts")."""
    app = make_sqlite_app(STATS_CLOCK=clock)
    api = Api(app, app.test_client())
    alice = api.account("alice@example.org")
    record = api.create(alice)
    assert public_download(api, record["id"]).status_code == 200
    flush(app)
    with app.app_context():
        salt = db.session.execute(select(StatsSalt.salt)).scalar_one()
    database = make_url(app.config["SQLALCHEMY_DATABASE_URI"]).database
    files = [Path(database), Path(database + "-wal")]

    def holding_the_salt() -> list[str]:
        return [f.name for f in files if f.exists() and salt in f.read_bytes()]

    assert holding_the_salt(), "the salt is written to the database before the roll-over"
    clock.advance(24 * 3600)
    flush(app)  # the roll-over
    assert rows_of(app, StatsSalt) == 0
    assert holding_the_salt() == []
    # The database still works: the next download is counted under the new day's salt.
    assert public_download(api, record["id"]).status_code == 200
    flush(app)
    assert stats(api, alice, record["id"], granularity="month")["total"] == 2
