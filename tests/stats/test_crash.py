"""What a crash loses, with the real server: the counts since the last flush, no more."""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path

from tests.support import samples
from tests.support.api import encode_multipart
from tests.support.replicas import wait_for
from tests.support.server import clean_env, flask, request, serving_process


def _counted(db_path: Path) -> int:
    with sqlite3.connect(db_path) as conn:
        return conn.execute("SELECT coalesce(sum(total), 0) FROM stats_daily").fetchone()[0]


def _download(port: int, record_id: str, visitor: int) -> None:
    agent = {"User-Agent": f"Mozilla/5.0 Firefox/128.0 visitor/{visitor}"}
    status, _, _ = request(port, "GET", f"/api/public/files/{record_id}/download", headers=agent)
    assert status == 200


def test_kill_9_loses_at_most_the_last_interval(tmp_path: Path) -> None:
    db_path = tmp_path / "db.sqlite3"
    env = clean_env(
        DATABASE_URL=f"sqlite:///{db_path}",
        STORAGE_LOCAL_ROOT=str(tmp_path / "storage"),
        STATS_FLUSH_SECONDS="3600",
    )
    assert flask("db", "upgrade", env=env).returncode == 0
    created = flask(
        "create-user", "--email", "k@example.org", "--name", "K", "--password", "pw-12345", env=env
    )
    assert created.returncode == 0, created.stderr

    with serving_process(env, tmp_path / "a.log") as (port, process):
        body = json.dumps({"email": "k@example.org", "password": "pw-12345", "token_name": "t"})
        status, _, raw = request(
            port, "POST", "/api/tokens", body.encode(), {"Content-Type": "application/json"}
        )
        assert status == 201, raw
        auth = {"Authorization": f"Bearer {json.loads(raw)['token']}"}
        content_type, form = encode_multipart(
            [("files[]", "r.pdf", samples.pdf_bytes(), "application/pdf")]
        )
        status, _, raw = request(
            port, "POST", "/api/files", form, {**auth, "Content-Type": content_type}
        )
        assert status == 201, raw
        record_id = json.loads(raw)["files"][0]["id"]
        for visitor in range(3):
            _download(port, record_id, visitor)
        assert _counted(db_path) == 0  # an hour to the next flush: all in memory
        process.send_signal(signal.SIGTERM)  # a clean stop flushes
        process.wait(timeout=15)
    assert _counted(db_path) == 3

    with serving_process(env, tmp_path / "b.log") as (port, process):
        for visitor in range(3, 5):
            _download(port, record_id, visitor)
        process.kill()  # kill -9: what was not flushed yet is lost
        process.wait(timeout=15)
    assert _counted(db_path) == 3

    with serving_process({**env, "STATS_FLUSH_SECONDS": "0.2"}, tmp_path / "c.log") as (
        port,
        process,
    ):
        _download(port, record_id, 5)
        # Flushed within an interval: a kill now would lose nothing.
        wait_for(lambda: _counted(db_path) == 4, seconds=10)
        process.kill()
        process.wait(timeout=15)
    assert _counted(db_path) == 4
