"""Health probes, request ids and the access log."""

from __future__ import annotations

import json
import logging
import re
import socket
from pathlib import Path

import pytest

from app import create_app
from app.access_log import JSONFormatter
from app.extensions import db
from tests.conftest import base_config
from tests.support.api import Account, Api


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_healthz_needs_nothing(api: Api):
    response = api.client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok"}
    assert response.headers["Cache-Control"] == "no-store"


def test_readyz_checks_database_and_storage(api: Api):
    response = api.client.get("/readyz")
    assert response.status_code == 200
    assert response.get_json() == {
        "status": "ok",
        "checks": {"database": "ok", "storage": "ok"},
    }


def test_readyz_names_the_failing_dependency(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    app = create_app(
        base_config(
            SQLALCHEMY_DATABASE_URI=f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/x",
            STORAGE_BACKEND="s3",
            S3_BUCKET="files",
            S3_ENDPOINT_URL=f"http://127.0.0.1:{closed_port()}",
            S3_CONNECT_TIMEOUT=1,
            S3_MAX_ATTEMPTS=1,
        )
    )
    response = app.test_client().get("/readyz")
    assert response.status_code == 503
    body = response.get_json()
    assert body["checks"] == {"database": "fail", "storage": "fail"}
    assert body["message"] == "Service unavailable: database, storage not reachable."
    assert "127.0.0.1" not in json.dumps(body)
    with app.app_context():
        db.engine.dispose()


def test_readyz_with_only_storage_down(api: Api, monkeypatch: pytest.MonkeyPatch):
    from app.storage import StorageUnavailable

    def down() -> None:
        raise StorageUnavailable("bucket gone")

    monkeypatch.setattr(api.app.extensions["storage"], "check", down)
    response = api.client.get("/readyz")
    assert response.status_code == 503
    assert response.get_json()["checks"] == {"database": "ok", "storage": "fail"}


def test_request_id_is_taken_or_made_and_echoed(api: Api):
    given = api.client.get("/healthz", headers={"X-Request-ID": "abc-123.x"})
    assert given.headers["X-Request-ID"] == "abc-123.x"
    made = api.client.get("/healthz")
    assert re.fullmatch(r"[0-9a-f]{32}", made.headers["X-Request-ID"])
    hostile = api.client.get("/healthz", headers={"X-Request-ID": 'a b"<script>' + "x" * 200})
    assert re.fullmatch(r"[0-9a-f]{32}", hostile.headers["X-Request-ID"])


def access_lines(caplog: pytest.LogCaptureFixture) -> list[dict]:
    formatter = JSONFormatter()
    return [json.loads(formatter.format(r)) for r in caplog.records if r.name == "app.access"]


def test_one_access_line_per_request_with_its_facts(
    api: Api, alice: Account, caplog: pytest.LogCaptureFixture
):
    record = api.create(alice, "a.txt", b"hello world\n")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="app.access"):
        response = api.client.get(
            f"/api/files/{record['id']}/download",
            headers={**alice.auth, "X-Request-ID": "req-1"},
            buffered=True,
        )
        api.client.get("/api/public/files/not-an-id", buffered=True)
    assert response.status_code == 200
    first, second = access_lines(caplog)
    assert first["request_id"] == "req-1"
    assert first["method"] == "GET"
    assert first["path"] == f"/api/files/{record['id']}/download"
    assert first["status"] == 200
    assert first["bytes"] == len(b"hello world\n")
    assert first["user_id"] == alice.id
    assert first["duration_ms"] >= 0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", first["time"])
    assert (second["status"], second["user_id"]) == (404, None)


def test_no_secret_ever_reaches_a_log_line(
    api: Api, alice: Account, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    secrets_seen = [alice.password, alice.token, alice.token.split("|")[1]]
    with caplog.at_level(logging.DEBUG):
        login = api.client.post(
            "/api/tokens",
            json={"email": alice.email, "password": alice.password, "token_name": "t"},
            buffered=True,
        )
        new_token = login.get_json()["token"]
        secrets_seen += [new_token, new_token.split("|")[1]]
        api.client.post(
            "/api/tokens",
            json={"email": alice.email, "password": "wrong-Pa55word", "token_name": "t"},
            buffered=True,
        )
        secrets_seen.append("wrong-Pa55word")
        api.get("/api/files", alice, buffered=True)
        api.client.get("/api/files", headers={"Authorization": "Bearer 9|forged-secret"})
        secrets_seen.append("forged-secret")

        import app.files.pagination as pagination

        def boom(*args, **kwargs):
            raise RuntimeError("internal failure")

        monkeypatch.setattr(pagination, "paginate", boom)
        assert api.get("/api/files", alice, buffered=True).status_code == 500

    formatter = JSONFormatter()
    text = "\n".join(formatter.format(r) for r in caplog.records) + caplog.text
    assert access_lines(caplog), "access lines were logged"
    for secret in secrets_seen:
        assert secret not in text
    assert "Authorization" not in text and "Bearer" not in text


@pytest.mark.parametrize(
    ("mode", "v4", "v6"),
    [
        (None, "203.0.113.0", "2001:db8:abcd::"),  # the default: truncated
        ("truncated", "203.0.113.0", "2001:db8:abcd::"),
        ("full", "203.0.113.77", "2001:db8:abcd:12:3456::1"),
        ("none", None, None),
    ],
)
def test_the_access_log_keeps_what_access_log_addresses_says_of_the_address(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    mode: str | None,
    v4: str | None,
    v6: str | None,
):
    """IPv4 to its /24, IPv6 to its /48 (an IPv4-mapped IPv6 address as IPv4), or nothing;
    the whole address reaches no log line unless asked for."""
    settings = {} if mode is None else {"ACCESS_LOG_ADDRESSES": mode}
    app = create_app(
        base_config(
            SQLALCHEMY_DATABASE_URI=f"sqlite:///{tmp_path / 'db.sqlite3'}",
            STORAGE_LOCAL_ROOT=str(tmp_path / "storage"),
            **settings,
        )
    )
    client = app.test_client()
    caplog.clear()
    sent = ["203.0.113.77", "2001:db8:abcd:12:3456::1", "::ffff:203.0.113.77"]
    with caplog.at_level(logging.DEBUG):
        for address in sent:
            client.get("/healthz", environ_base={"REMOTE_ADDR": address}, buffered=True)
    logged = [line["remote_addr"] for line in access_lines(caplog)]
    assert logged == [v4, v6, sent[2] if mode == "full" else v4]
    if mode != "full":
        text = "\n".join(JSONFormatter().format(r) for r in caplog.records) + caplog.text
        for address in sent:
            assert address not in text
    with app.app_context():
        db.engine.dispose()


def test_access_log_addresses_is_one_of_three(tmp_path: Path):
    from app.config import ConfigError

    config = base_config(
        SQLALCHEMY_DATABASE_URI=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        STORAGE_LOCAL_ROOT=str(tmp_path / "storage"),
        ACCESS_LOG_ADDRESSES="anonymous",
    )
    with pytest.raises(ConfigError, match="ACCESS_LOG_ADDRESSES"):
        create_app(config)
