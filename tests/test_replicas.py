"""Two app processes that share only PostgreSQL, the bucket and Redis act as one service."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support import samples
from tests.support.api import encode_multipart
from tests.support.server import clean_env, flask, request, running_server

pytestmark = [pytest.mark.postgres, pytest.mark.s3server]


def login(port: int, email: str, password: str) -> tuple[int, dict[str, Any]]:
    status, _, body = request(
        port,
        "POST",
        "/api/tokens",
        json.dumps({"email": email, "password": password, "token_name": "r"}).encode(),
        {"Content-Type": "application/json"},
    )
    return status, json.loads(body)


def test_two_processes_share_tokens_content_and_rate_limits(
    postgres_s3_env: dict, redis_url: str, tmp_path: Path
):
    env = clean_env(
        **postgres_s3_env,
        RATELIMIT_STORAGE_URI=redis_url,
        RATELIMIT_KEY_PREFIX=f"replica-test-{uuid.uuid4().hex}",
        RATELIMIT_TOKENS="3 per minute",
    )
    assert flask("db", "upgrade", env=env).returncode == 0
    created = flask(
        "create-user", "--email", "r@example.org", "--name", "R", "--password", "pw-12345", env=env
    )
    assert created.returncode == 0, created.stderr

    with (
        running_server(env, tmp_path / "a.log") as a,
        running_server(env, tmp_path / "b.log") as b,
    ):
        status, body = login(a, "r@example.org", "pw-12345")
        assert status == 201
        auth = {"Authorization": f"Bearer {body['token']}"}

        data = samples.png_bytes()
        content_type, form = encode_multipart([("files[]", "bild.png", data, "image/png")])
        status, _, raw = request(
            a, "POST", "/api/files", form, {**auth, "Content-Type": content_type}
        )
        assert status == 201, raw
        record_id = json.loads(raw)["files"][0]["id"]

        status, headers, downloaded = request(
            b, "GET", f"/api/files/{record_id}/download", headers=auth
        )
        assert (status, downloaded) == (200, data)
        status, _, raw = request(b, "GET", "/api/files", headers=auth)
        assert [r["id"] for r in json.loads(raw)["data"]] == [record_id]

        # Token creation is limited across both processes: 3 a minute in all.
        results = [login(port, "r@example.org", "wrong")[0] for port in (b, a)]
        assert results == [422, 422]  # the successful login above was the first of three
        assert login(b, "r@example.org", "wrong")[0] == 429

        # A token revoked through one process is dead in the other.
        assert request(b, "DELETE", "/api/tokens/current", headers=auth)[0] == 204
        assert request(a, "GET", "/api/files", headers=auth)[0] == 401
