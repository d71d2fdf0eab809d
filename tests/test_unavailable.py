"""Real unreachable dependencies: a closed database port and a closed S3 port answer 503."""

from __future__ import annotations

import socket
from pathlib import Path

from app import create_app
from app.extensions import db
from tests.conftest import base_config
from tests.support.api import Api


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_database_is_503(tmp_path: Path):
    app = create_app(
        base_config(
            SQLALCHEMY_DATABASE_URI=f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/x",
            STORAGE_LOCAL_ROOT=str(tmp_path / "storage"),
        )
    )
    client = app.test_client()
    for path in ("/api/files", "/api/public/files"):
        response = client.get(path, headers={"Authorization": "Bearer 1|secret"})
        assert response.status_code == 503
        assert response.get_json() == {
            "message": "Service unavailable: the database cannot be reached."
        }
    with app.app_context():
        db.engine.dispose()


def test_unreachable_bucket_is_503_and_nothing_is_recorded(make_sqlite_app, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    app = make_sqlite_app(
        STORAGE_BACKEND="s3",
        S3_BUCKET="files",
        S3_ENDPOINT_URL=f"http://127.0.0.1:{closed_port()}",
        S3_CONNECT_TIMEOUT=1,
        S3_MAX_ATTEMPTS=1,
    )
    api = Api(app, app.test_client())
    alice = api.account("alice@example.org")
    response = api.upload(alice, [("a.txt", b"hello\n")])
    assert response.status_code == 503
    assert response.get_json() == {
        "message": "Service unavailable: the file storage cannot be reached."
    }
    assert api.rows() == []
