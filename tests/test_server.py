"""The operator's path end to end: migrate, provision, `flask serve` under waitress, real HTTP."""

from __future__ import annotations

import http.client
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from werkzeug.datastructures import FileStorage
from werkzeug.test import encode_multipart

from tests.support import samples
from tests.support.server import clean_env, flask, request, running_server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    env = clean_env(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        STORAGE_LOCAL_ROOT=str(tmp_path / "storage"),
        ADMIN_EMAIL="admin@example.org",
        ADMIN_PASSWORD="admin-password",
    )
    for step in (("db", "upgrade"), ("provision-admin",)):
        result = flask(*step, env=env)
        assert result.returncode == 0, result.stderr
    with running_server(env, tmp_path / "server.log") as port:
        yield port, env


def test_serve_answers_the_whole_flow(server):
    port, _ = server
    status, _, body = request(
        port,
        "POST",
        "/api/tokens",
        json.dumps(
            {"email": "admin@example.org", "password": "admin-password", "token_name": "e2e"}
        ).encode(),
        {"Content-Type": "application/json"},
    )
    assert status == 201
    auth = {"Authorization": f"Bearer {json.loads(body)['token']}"}

    data = samples.pdf_bytes()
    boundary = "e2e-boundary"
    _, payload = encode_multipart(
        {
            "files[]": FileStorage(io.BytesIO(data), "bericht.pdf", content_type="application/pdf"),
            "titel": "E2E",
        },
        boundary,
    )
    status, _, body = request(
        port,
        "POST",
        "/api/files",
        payload,
        {**auth, "Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert status == 201, body
    record = json.loads(body)["files"][0]

    status, headers, body = request(
        port, "GET", f"/api/files/{record['id']}/download", headers=auth
    )
    assert status == 200 and body == data
    assert headers["Content-Type"] == "application/pdf"

    status, headers, body = request(port, "GET", f"/api/public/files/{record['id']}/download")
    assert status == 200 and body == data

    status, _, body = request(port, "DELETE", f"/api/files/{record['id']}", headers=auth)
    assert status == 204


def test_body_over_the_limit_is_refused_with_json_413_before_it_is_read(server):
    port, _ = server
    limit = 25 * 200 * 1024 * 1024 + 1024 * 1024
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest("POST", "/api/files")
        conn.putheader("Content-Type", "multipart/form-data; boundary=x")
        conn.putheader("Content-Length", str(limit + 1))
        conn.endheaders()
        conn.send(b"--x\r\n")  # a few bytes only: the answer must not wait for the rest
        response = conn.getresponse()
        assert response.status == 413
        assert response.getheader("Content-Type") == "application/json"
        assert json.loads(response.read()) == {"message": "The request body is too large."}
    finally:
        conn.close()
