"""Start-up settings: wrong values stop the app with one clear line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app import create_app
from app.config import ConfigError
from tests.conftest import base_config

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "overrides,setting",
    [
        ({"STORAGE_BACKEND": "ftp"}, "STORAGE_BACKEND"),
        ({"STORAGE_BACKEND": "s3", "S3_BUCKET": None}, "S3_BUCKET"),
        ({"APP_TIMEZONE": "Mars/Olympus"}, "APP_TIMEZONE"),
        ({"SQLALCHEMY_DATABASE_URI": "not a url"}, "DATABASE_URL"),
        ({"TOKEN_TTL_MINUTES": 0}, "TOKEN_TTL_MINUTES"),
        ({"PORT": 70000}, "PORT"),
        ({"RATELIMIT_UPLOADS": "lots"}, "RATELIMIT_UPLOADS"),
        ({"RATELIMIT_TOKENS": "10 per fortnight"}, "RATELIMIT_TOKENS"),
        (
            {"RATELIMIT_ENABLED": True, "RATELIMIT_STORAGE_URI": "carrier-pigeon://coop"},
            "RATELIMIT_STORAGE_URI",
        ),
        ({"PROXY_COUNT": -1}, "PROXY_COUNT"),
        ({"TOKEN_CACHE_SECONDS": -5}, "TOKEN_CACHE_SECONDS"),
        ({"STORAGE_BACKEND": "s3", "S3_BUCKET": "b", "S3_PART_SIZE": 1024}, "S3_PART_SIZE"),
    ],
)
def test_wrong_settings_are_named(tmp_path: Path, overrides: dict, setting: str):
    config = base_config(
        SQLALCHEMY_DATABASE_URI=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        STORAGE_LOCAL_ROOT=str(tmp_path / "storage"),
    )
    config.update(overrides)
    with pytest.raises(ConfigError, match=setting):
        create_app(config)


@pytest.mark.parametrize(
    "env,setting",
    [
        ({"STORAGE_BACKEND": "s3"}, "S3_BUCKET"),
        ({"PORT": "eighty"}, "PORT"),
        ({"TOKEN_TTL_MINUTES": "soon"}, "TOKEN_TTL_MINUTES"),
        ({"TOKEN_CACHE_SECONDS": "a minute"}, "TOKEN_CACHE_SECONDS"),
        ({"RATELIMIT_STORAGE_URI": "carrier-pigeon://coop"}, "RATELIMIT_STORAGE_URI"),
    ],
)
def test_flask_cli_stops_with_one_line(tmp_path: Path, env: dict, setting: str):
    environ = {
        k: v for k, v in os.environ.items() if not k.startswith(("S3_", "STORAGE_", "DATABASE"))
    }
    environ.update(env, DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    result = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "wsgi", "db", "current"],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("configuration error:") and setting in lines[0]
    assert "Traceback" not in result.stderr


def test_environment_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'env.sqlite3'}")
    monkeypatch.setenv("STORAGE_LOCAL_ROOT", str(tmp_path / "blobs"))
    monkeypatch.setenv("APP_TIMEZONE", "Europe/Berlin")
    monkeypatch.setenv("TOKEN_TTL_MINUTES", "60")
    monkeypatch.setenv("PORT", "9000")
    monkeypatch.setenv("S3_PARTS_IN_FLIGHT", "2")
    monkeypatch.setenv("TOKEN_CACHE_SECONDS", "15")
    app = create_app({"TESTING": True})
    assert app.config["SQLALCHEMY_DATABASE_URI"].endswith("env.sqlite3")
    assert app.config["STORAGE_LOCAL_ROOT"] == str(tmp_path / "blobs")
    assert app.config["APP_TIMEZONE"] == "Europe/Berlin"
    assert app.config["TOKEN_TTL_MINUTES"] == 60
    assert app.config["PORT"] == 9000
    assert app.config["S3_PARTS_IN_FLIGHT"] == 2
    assert app.config["TOKEN_CACHE_SECONDS"] == 15
