"""`flask serve` with two processes, on the embedded default (SQLite, local storage, no Redis)
and on PostgreSQL: both serve, and what must hold across them holds (docs/deployment.md,
"Processes and replicas")."""

from __future__ import annotations

import http.client
import json
import shutil
import signal
import socket
import sqlite3
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from app.cache import LISTENER_NAME
from app.shared import ProcessesStorage
from app.stats.clicks import REDIS_TTL_MS, SharedClicks
from tests.conftest import create_account
from tests.support import samples
from tests.support.api import encode_multipart
from tests.support.replicas import wait_for
from tests.support.server import clean_env, request, serving_process

BROWSER = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0"}


def children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def connections_held(pid: int, port: int) -> int:
    """Open connections to `port` that process `pid` has accepted (Linux's /proc)."""
    established = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port and fields[3] == "01":
            established.add(fields[9])
    held = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().name
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in established:
            held += 1
    return held


def login(port: int, password: str) -> tuple[int, dict]:
    body = json.dumps({"email": "p@example.org", "password": password, "token_name": "t"})
    status, _, raw = request(
        port, "POST", "/api/tokens", body.encode(), {"Content-Type": "application/json"}
    )
    return status, json.loads(raw)


def counted(db_path: Path) -> int:
    with sqlite3.connect(db_path) as connection:
        return connection.execute("SELECT coalesce(sum(total), 0) FROM stats_daily").fetchone()[0]


def test_rate_limits_and_clicks_in_the_shared_file_count_for_every_process(
    tmp_path: Path,
) -> None:
    """Two of each, as two processes hold them once the server has shared them."""
    path = tmp_path / "shared.sqlite3"
    limits = [ProcessesStorage(), ProcessesStorage()]
    for storage in limits:
        storage.share(path)
    assert [limits[n % 2].incr("login", 60) for n in range(4)] == [1, 2, 3, 4]
    assert limits[1].get("login") == 4
    assert limits[0].get_expiry("login") > time.time() + 55
    limits[1].clear("login")
    assert limits[0].get("login") == 0

    visitor, record = "v", uuid.uuid4()
    clicks = [SharedClicks(path), SharedClicks(path)]
    assert clicks[0].previous([((visitor, record), 100.0)]) == [None]
    assert clicks[1].previous([((visitor, record), 110.0)]) == [100.0]
    clicks[0].forget_before(110.0 + REDIS_TTL_MS / 1000 + 1)
    assert clicks[1].previous([((visitor, record), 300.0)]) == [None]


@pytest.fixture
def migrated(sqlite_template: Path, tmp_path: Path) -> dict[str, str]:
    shutil.copy(sqlite_template, tmp_path / "db.sqlite3")
    return clean_env(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        STORAGE_LOCAL_ROOT=str(tmp_path / "storage"),
        SERVER_PROCESSES="2",
        RATELIMIT_TOKENS="3 per minute",
        STATS_FLUSH_SECONDS="3600",
    )


@pytest.fixture
def env(migrated: dict[str, str], tmp_path: Path) -> dict[str, str]:
    url = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    create_account(url, tmp_path / "unused", "p@example.org", "pw-12345")
    return migrated


def test_two_processes_serve_and_share_limits_and_the_double_click_rule(
    env: dict[str, str], tmp_path: Path
) -> None:
    with serving_process(env, tmp_path / "server.log") as (port, server):
        wait_for(lambda: len(children(server.pid)) == 2, seconds=20)
        workers = children(server.pid)

        # Both answer: of 16 connections kept open, each process holds some.
        held = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _ in range(16)]
        try:
            for connection in held:
                connection.request("GET", "/healthz")
                assert connection.getresponse().status == 200
            assert all(connections_held(pid, port) > 0 for pid in workers)
        finally:
            for connection in held:
                connection.close()

        # Token creation: 3 a minute in all, whichever process answers each.
        status, body = login(port, "pw-12345")
        assert status == 201, body
        assert [login(port, "wrong")[0] for _ in range(2)] == [422, 422]
        assert login(port, "pw-12345")[0] == 429

        auth = {"Authorization": f"Bearer {body['token']}"}
        content_type, form = encode_multipart(
            [("files[]", "r.pdf", samples.pdf_bytes(), "application/pdf")]
        )
        status, _, raw = request(
            port, "POST", "/api/files", form, {**auth, "Content-Type": content_type}
        )
        assert status == 201, raw
        record_id = json.loads(raw)["files"][0]["id"]
        # One visitor, eight downloads within 30 s, over both processes: one download.
        for _ in range(8):
            status, _, _ = request(
                port, "GET", f"/api/public/files/{record_id}/download", headers=BROWSER
            )
            assert status == 200
        assert counted(tmp_path / "db.sqlite3") == 0  # an hour to the next flush

        # A stop ends every process, each flushing what it counted.
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=15) == 0
        assert all(not Path(f"/proc/{pid}").exists() for pid in workers)
    assert counted(tmp_path / "db.sqlite3") == 1
    log = (tmp_path / "server.log").read_text()
    assert log.startswith("Serving on http://127.0.0.1:")
    assert "Traceback" not in log


@pytest.mark.postgres
def test_on_postgresql_a_revoked_token_is_dead_in_both_processes_at_once(
    make_postgres_database, tmp_path: Path
) -> None:
    database = make_postgres_database(migrated=True)
    env = clean_env(
        DATABASE_URL=database,
        STORAGE_LOCAL_ROOT=str(tmp_path / "storage"),
        SERVER_PROCESSES="2",
    )
    create_account(database, tmp_path / "unused", "p@example.org", "pw-12345")
    with serving_process(env, tmp_path / "server.log") as (port, server):
        wait_for(lambda: len(children(server.pid)) == 2, seconds=20)
        status, body = login(port, "pw-12345")
        assert status == 201, body
        auth = {"Authorization": f"Bearer {body['token']}"}
        held = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _ in range(16)]

        def statuses() -> list[int]:
            answers = []
            for connection in held:
                connection.request("GET", "/api/files", headers=auth)
                response = connection.getresponse()
                response.read()
                answers.append(response.status)
            return answers

        try:
            assert statuses() == [200] * 16  # each process has checked the token and keeps it
            assert all(connections_held(pid, port) > 0 for pid in children(server.pid))
            engine = sa.create_engine(database)
            with engine.connect() as connection:
                listeners = connection.scalar(
                    sa.text(
                        "SELECT count(*) FROM pg_stat_activity"
                        " WHERE application_name = :n AND datname = current_database()"
                    ),
                    {"n": LISTENER_NAME},
                )
            engine.dispose()
            assert listeners == 2
            assert request(port, "DELETE", "/api/tokens/current", headers=auth)[0] == 204
            wait_for(lambda: statuses() == [401] * 16, seconds=2)
        finally:
            for connection in held:
                connection.close()


def test_a_busy_port_is_one_line_with_two_processes(make_sqlite_app) -> None:
    app = make_sqlite_app()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = app.test_cli_runner().invoke(
            args=["serve", "--host", "127.0.0.1", "--port", str(port), "--processes", "2"]
        )
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"Error: port {port} on 127.0.0.1 is already in use: stop what listens there, or "
        "choose another with PORT or --port"
    )
