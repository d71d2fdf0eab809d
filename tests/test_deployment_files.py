"""docker-compose.yml and the Dockerfile, checked without a Docker engine."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from app.config import settings_from_env

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
DOCKERFILE = (ROOT / "Dockerfile").read_text()
BOTO3_CREDENTIALS = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}


class RecordingEnviron(dict):
    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key, default=None):
        self.asked.add(key)
        return super().get(key, default)


def settings_the_app_reads() -> set[str]:
    environ = RecordingEnviron()
    settings_from_env(environ, "/nonexistent")
    return environ.asked


def test_services_and_dependencies():
    services = COMPOSE["services"]
    assert set(services) == {"postgres", "minio", "minio-init", "app"}
    assert services["app"]["depends_on"] == {
        "postgres": {"condition": "service_healthy"},
        "minio-init": {"condition": "service_completed_successfully"},
    }
    for name in ("postgres", "minio", "app"):
        assert "healthcheck" in services[name], name
    assert set(COMPOSE["volumes"]) == {"postgres-data", "minio-data"}


def test_app_environment_uses_only_settings_the_app_reads():
    environment = COMPOSE["services"]["app"]["environment"]
    known = settings_the_app_reads() | BOTO3_CREDENTIALS
    assert set(environment) <= known, set(environment) - known
    assert environment["STORAGE_BACKEND"] == "s3"
    assert environment["S3_ENDPOINT_URL"] == "http://minio:9000"
    assert environment["DATABASE_URL"].startswith("postgresql+psycopg://")


def test_bucket_is_created_private():
    init = COMPOSE["services"]["minio-init"]["entrypoint"]
    assert "mc mb --ignore-existing local/files" in init
    assert "mc anonymous set none local/files" in init
    assert COMPOSE["services"]["app"]["environment"]["S3_BUCKET"] == "files"


def test_only_the_api_is_published_and_only_on_loopback():
    services = COMPOSE["services"]
    for name in ("postgres", "minio", "minio-init"):
        assert "ports" not in services[name], f"{name} must not publish a port"
    assert services["app"]["ports"] == ["127.0.0.1:8000:8000"]


def test_no_secret_is_written_into_the_files():
    text = (ROOT / "docker-compose.yml").read_text()
    for line in text.splitlines():
        if re.search(r"(PASSWORD|SECRET|ACCESS_KEY|_USER):", line):
            value = line.split(":", 1)[1].strip()
            assert value.startswith("${") or value == "files", line
    for line in DOCKERFILE.splitlines():
        assert not re.match(r"\s*(ENV|ARG)\b.*(PASSWORD|SECRET|ACCESS_KEY)", line), line


def test_image_migrates_provisions_and_serves():
    cmd = next(line for line in DOCKERFILE.splitlines() if line.startswith("CMD"))
    assert "db upgrade" in cmd and "provision-admin" in cmd and "serve" in cmd
    assert "HEALTHCHECK" in DOCKERFILE and "/readyz" in DOCKERFILE
    assert re.search(r"^USER app$", DOCKERFILE, re.MULTILINE)
