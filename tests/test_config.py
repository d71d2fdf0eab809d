"""Start-up settings: wrong values stop the app with one clear line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app import create_app
from app.config import DEFAULTS, ConfigError, settings_from_env
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
        ({"RATELIMIT_WRITES": "often"}, "RATELIMIT_WRITES"),
        ({"OAI_NAMESPACE": "127.0.0.1"}, "OAI_NAMESPACE"),
        ({"OAI_NAMESPACE": "localhost"}, "OAI_NAMESPACE"),
        (
            {"RATELIMIT_ENABLED": True, "RATELIMIT_STORAGE_URI": "carrier-pigeon://coop"},
            "RATELIMIT_STORAGE_URI",
        ),
        ({"PROXY_COUNT": -1}, "PROXY_COUNT"),
        ({"SERVER_PROCESSES": 0}, "SERVER_PROCESSES"),
        ({"DOWNLOAD_OFFLOAD": "apache"}, "DOWNLOAD_OFFLOAD"),
        ({"DOWNLOAD_OFFLOAD_PREFIX": "_stored"}, "DOWNLOAD_OFFLOAD_PREFIX"),
        ({"DOWNLOAD_OFFLOAD_PREFIX": "/a/../b/"}, "DOWNLOAD_OFFLOAD_PREFIX"),
        ({"TOKEN_CACHE_SECONDS": -5}, "TOKEN_CACHE_SECONDS"),
        ({"STATS": "yes"}, "STATS"),
        ({"STATS_PUBLIC": "0"}, "STATS_PUBLIC"),
        ({"STATS_FLUSH_SECONDS": 0}, "STATS_FLUSH_SECONDS"),
        ({"STATS_REDIS_URL": "localhost:6379"}, "STATS_REDIS_URL"),
        ({"STORAGE_BACKEND": "s3", "S3_BUCKET": "b", "S3_PART_SIZE": 1024}, "S3_PART_SIZE"),
        ({"DATACITE_URL": "https://api.test.datacite.org"}, "DATACITE_PREFIX"),
        (
            {
                "DATACITE_URL": "https://api.test.datacite.org",
                "DATACITE_REPOSITORY": "X.Y",
                "DATACITE_PASSWORD": "secret",
            },
            "DATACITE_PREFIX",
        ),
        (
            {
                "DATACITE_URL": "https://api.test.datacite.org",
                "DATACITE_REPOSITORY": "X.Y",
                "DATACITE_PASSWORD": "secret",
                "DATACITE_PREFIX": "doi:10.5072",
            },
            "DATACITE_PREFIX",
        ),
        ({"DATACITE_REGISTER_AT": "tomorrow"}, "DATACITE_REGISTER_AT"),
        (
            {
                "DATACITE_URL": "https://api.test.datacite.org",
                "DATACITE_REPOSITORY": "X.Y",
                "DATACITE_PASSWORD": "secret",
                "DATACITE_PREFIX": "10.5072",
                "PUBLIC_BASE_URL": None,
            },
            "PUBLIC_BASE_URL",
        ),
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
        ({"OAI_NAMESPACE": "oai:repo.example.org"}, "OAI_NAMESPACE"),
        ({"TOKEN_TTL_MINUTES": "soon"}, "TOKEN_TTL_MINUTES"),
        ({"TOKEN_CACHE_SECONDS": "a minute"}, "TOKEN_CACHE_SECONDS"),
        ({"RATELIMIT_STORAGE_URI": "carrier-pigeon://coop"}, "RATELIMIT_STORAGE_URI"),
        ({"DATACITE_PASSWORD": "secret"}, "DATACITE_URL"),
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


# One home for the settings: what the code reads is declared in app/config.py and listed, with
# its default, in the settings table (docs/settings.md).

SETTINGS_TABLE = ROOT / "docs" / "settings.md"
APP_SOURCES = sorted([*(ROOT / "app").rglob("*.py"), ROOT / "wsgi.py"])
#: Read by boto3's credential chain, not by the app; listed in the table all the same.
READ_BY_BOTO3 = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
CONFIG_READ = re.compile(
    r"""config(?:\[|\.get\()\s*["']([A-Z][A-Z0-9_]+)["']"""
    r"""|_(?:setting|number)\(\s*config,\s*["']([A-Z][A-Z0-9_]+)["']"""
)


class RecordingEnviron(dict):
    """An environment that remembers which variables were asked for."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.asked: set[str] = set()

    def get(self, key: str, default: object = None) -> object:
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> object:
        self.asked.add(key)
        return super().__getitem__(key)


def environment_settings() -> set[str]:
    environ = RecordingEnviron()
    settings_from_env(environ, "instance")
    return environ.asked


def documented_settings() -> dict[str, str]:
    """Variable -> its Default cell, from the settings table (docs/settings.md)."""
    text = SETTINGS_TABLE.read_text(encoding="utf-8")
    table: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        names_cell, default_cell = (cell.strip() for cell in line.strip("|").split(" | ")[:2])
        names = re.findall(r"`([A-Z][A-Z0-9_]+)`", names_cell)
        defaults = default_cell.split(", ") if len(names) > 1 else [default_cell]
        if len(defaults) != len(names):
            defaults = [default_cell] * len(names)
        for name, default in zip(names, defaults, strict=True):
            assert name not in table, f"{name} is in the settings table twice"
            table[name] = default
    return table


def config_keys_read_by_the_code() -> dict[str, set[str]]:
    """Config key -> the files that read it."""
    found: dict[str, set[str]] = {}
    for path in APP_SOURCES:
        for match in CONFIG_READ.finditer(path.read_text(encoding="utf-8")):
            key = match.group(1) or match.group(2)
            found.setdefault(key, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_environment_setting_is_in_the_settings_table():
    documented = set(documented_settings())
    read = environment_settings()
    assert read - documented == set(), "settings missing from the settings table"
    assert documented - read - READ_BY_BOTO3 == set(), (
        "documented settings that app/config.py's settings_from_env does not read"
    )


def test_every_config_key_the_code_reads_is_declared_in_app_config():
    declared = set(settings_from_env({}, "instance")) | set(DEFAULTS)
    read = config_keys_read_by_the_code()
    assert {"S3_PART_SIZE", "PORT", "APP_TIMEZONE"} <= set(read)  # the scan finds reads
    hidden = {key: sorted(files) for key, files in read.items() if key not in declared}
    assert hidden == {}, "read by the code but declared in neither settings_from_env nor DEFAULTS"


def test_only_app_config_reads_the_environment():
    """No knob is read from the environment behind app/config.py's back."""
    for path in APP_SOURCES:
        for line in path.read_text(encoding="utf-8").splitlines():
            if re.search(r"\bos\.environ\b|\bgetenv\(", line):
                assert "settings_from_env(os.environ" in line, f"{path}: {line.strip()}"


def _config_key_of(name: str) -> str:
    """The config key an environment variable sets (DATABASE_URL -> SQLALCHEMY_DATABASE_URI)."""
    default = settings_from_env({}, "instance")
    changed = settings_from_env({name: "7"}, "instance")
    [key] = [key for key in default if changed[key] != default[key]]
    return key


def test_the_settings_table_gives_the_config_defaults():
    defaults = settings_from_env({}, "instance")
    table = documented_settings()
    for name in environment_settings():
        cell, value = table[name], defaults[_config_key_of(name)]
        literal = re.fullmatch(r"`([^`]+)`", cell)
        if cell.startswith(("–", "none")):
            assert value is None, f"{name}: the table says unset, app/config.py has {value!r}"
        elif literal and literal.group(1) in table:
            # Falls back to another setting (OAI_ADMIN_EMAIL -> ADMIN_EMAIL).
            assert value is None, f"{name}: the table names a fallback, app/config.py has {value!r}"
        elif literal and isinstance(value, int | float):
            assert float(literal.group(1)) == value, f"{name}: table {cell}, config {value!r}"
        elif literal:
            assert literal.group(1) == str(value), f"{name}: table {cell}, config {value!r}"
        else:  # described in words, e.g. "SQLite file instance/files.sqlite3 of the checkout"
            assert value is not None, f"{name}: the table describes a default, config has none"


def test_s3_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("S3_PART_SIZE", str(16 * 1024 * 1024))
    monkeypatch.setenv("S3_READ_TIMEOUT", "2.5")
    monkeypatch.setenv("S3_ADDRESSING_STYLE", "virtual")
    settings = settings_from_env(os.environ, "instance")
    assert settings["S3_PART_SIZE"] == 16 * 1024 * 1024
    assert settings["S3_READ_TIMEOUT"] == 2.5
    assert settings["S3_ADDRESSING_STYLE"] == "virtual"
    monkeypatch.setenv("S3_READ_TIMEOUT", "a minute")
    with pytest.raises(ConfigError, match="S3_READ_TIMEOUT"):
        settings_from_env(os.environ, "instance")
