"""A real server (`flask serve`, waitress) per stack, for real clients (tus, HTTP downloads)."""

from __future__ import annotations

import hashlib
import itertools
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.server import ROOT, clean_env, flask, free_port

MiB = 1024 * 1024


@dataclass
class Deployment:
    """One deployment's settings; servers come and go, the database and storage stay."""

    env: dict[str, str]
    tmp_path: Path
    stack: str
    process: subprocess.Popen | None = None
    log_file: Any = None
    port: int = 0
    tokens: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    accounts: Iterator[int] = field(default_factory=itertools.count)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def endpoint(self) -> str:
        return f"{self.base}/api/uploads"

    def start(self) -> None:
        self.port = free_port()
        self.log_file = open(self.tmp_path / f"server-{self.port}.log", "w")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "flask", "--app", "wsgi", "serve", "--port", str(self.port)],
            cwd=ROOT,
            env=self.env,
            stdout=self.log_file,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                requests.get(f"{self.base}/healthz", timeout=1)
                return
            except requests.ConnectionError:
                assert self.process.poll() is None and time.monotonic() < deadline, self.log()
                time.sleep(0.1)

    def stop(self, kill: bool = False) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill() if kill else self.process.terminate()
            self.process.wait(timeout=15)
        self.process = None
        if self.log_file is not None:
            self.log_file.close()
            self.log_file = None

    def log(self) -> str:
        return "".join(p.read_text() for p in sorted(self.tmp_path.glob("server-*.log")))

    def token(self, email: str) -> str:
        email = self.names.get(email, email)
        if email not in self.tokens:
            response = requests.post(
                f"{self.base}/api/tokens",
                json={"email": email, "password": "a long passphrase", "token_name": "tus"},
                timeout=30,
            )
            assert response.status_code == 201, response.text
            self.tokens[email] = response.json()["token"]
        return self.tokens[email]

    def auth(self, email: str = "alice@example.org") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(email)}"}

    def download(self, record_id: str, email: str = "alice@example.org") -> bytes:
        response = requests.get(
            f"{self.base}/api/files/{record_id}/download", headers=self.auth(email), timeout=120
        )
        assert response.status_code == 200, response.text
        return response.content

    def record(self, record_id: str, email: str = "alice@example.org") -> dict[str, Any]:
        response = requests.get(
            f"{self.base}/api/files/{record_id}", headers=self.auth(email), timeout=30
        )
        assert response.status_code == 200, response.text
        return response.json()

    def records(self, email: str = "alice@example.org") -> list[dict[str, Any]]:
        response = requests.get(f"{self.base}/api/files", headers=self.auth(email), timeout=30)
        return response.json()["data"]

    def flask(self, *args: str) -> subprocess.CompletedProcess:
        return flask(*args, env=self.env)


#: Two per test that uses `deployment`, on each stack (about 35 tests of this package use it:
#: room for all of them and more, since one worker may run every test of a stack).
USERS = 200
CREATE_USERS = """
import sys
from app import create_app
from app.auth.services import create_user
from app.extensions import db
app = create_app()
app.config["PASSWORD_HASH_METHOD"] = "scrypt:1024:8:1"  # cheap, as in the other tests
with app.app_context():
    for n in range(int(sys.argv[1])):
        create_user(f"user{n}@example.org", f"User {n}", "a long passphrase")
    db.engine.dispose()
"""


@pytest.fixture(
    scope="package",
    params=[
        "sqlite-local",
        pytest.param("postgres-s3", marks=[pytest.mark.postgres, pytest.mark.s3server]),
    ],
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    """One deployment per stack for the package (its setup costs seconds); every test gets
    accounts of its own (the `deployment` fixture)."""
    tmp_path = tmp_path_factory.mktemp("tus")
    if request.param == "sqlite-local":
        env = clean_env(
            DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
            STORAGE_LOCAL_ROOT=str(tmp_path / "storage"),
        )
    else:
        env = clean_env(**_postgres_s3(request))
    env["ADMIN_EMAIL"], env["ADMIN_PASSWORD"] = "admin@example.org", "a long passphrase"
    for step in (("db", "upgrade"), ("provision-admin",)):
        result = flask(*step, env=env)
        assert result.returncode == 0, result.stdout + result.stderr
    created = subprocess.run(
        [sys.executable, "-c", CREATE_USERS, str(USERS)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert created.returncode == 0, created.stderr
    deployment = Deployment(env, tmp_path, request.param)
    deployment.start()
    try:
        yield deployment
    finally:
        deployment.stop()


def _postgres_s3(request: pytest.FixtureRequest) -> dict[str, str]:
    import boto3

    seaweedfs = request.getfixturevalue("seaweedfs")
    bucket = f"tus-{uuid.uuid4().hex[:16]}"
    boto3.client(
        "s3",
        endpoint_url=seaweedfs.endpoint_url,
        region_name=seaweedfs.region,
        aws_access_key_id=seaweedfs.access_key,
        aws_secret_access_key=seaweedfs.secret_key,
    ).create_bucket(Bucket=bucket)
    return {
        "DATABASE_URL": request.getfixturevalue("make_postgres_database")(),
        "STORAGE_BACKEND": "s3",
        "S3_BUCKET": bucket,
        "S3_ENDPOINT_URL": seaweedfs.endpoint_url,
        "S3_REGION": seaweedfs.region,
        "AWS_ACCESS_KEY_ID": seaweedfs.access_key,
        "AWS_SECRET_ACCESS_KEY": seaweedfs.secret_key,
    }


@pytest.fixture
def deployment(server: Deployment) -> Iterator[Deployment]:
    """The module's deployment, signed in as accounts nobody else uses (`alice`, `bob`)."""
    alice, bob = next(server.accounts), next(server.accounts)
    assert bob < USERS, f"the deployment's {USERS} accounts are used up: raise USERS"
    server.names = {
        "alice@example.org": f"user{alice}@example.org",
        "bob@example.org": f"user{bob}@example.org",
    }
    if server.process is None:
        server.start()
    yield server


def text_content(size: int, seed: str = "") -> bytes:
    """Deterministic plain text of `size` bytes (detected as text/plain), unlike every chunk."""
    lines = []
    total = 0
    n = 0
    while total < size:
        line = f"{seed}line {n:09d} {hashlib.sha256(f'{seed}{n}'.encode()).hexdigest()}\n"
        lines.append(line)
        total += len(line)
        n += 1
    return "".join(lines).encode()[:size]
