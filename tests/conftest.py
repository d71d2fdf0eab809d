"""Shared fixtures: the two stacks the API suite runs on, apps, clients and factories.

`sqlite-local`: a migrated SQLite file per test and a local storage folder.
`postgres-s3`: a throwaway PostgreSQL database for the session (tables emptied per test) and a
real SeaweedFS S3 server started for the session (an empty bucket per test: new, or emptied after
an earlier test).
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import botocore.loaders
import botocore.session
import pytest
import sqlalchemy as sa
from flask import Flask
from flask_migrate import upgrade

from app import create_app
from app.auth.services import create_user
from app.extensions import db
from tests.support.api import Account, Api
from tests.support.datacite import datacite_server  # noqa: F401  (a fixture for every folder)
from tests.support.openapi_client import OpenAPIValidatingClient

if TYPE_CHECKING:
    from tests.support.replicas import Replicas

POSTGRES_URL = os.environ.get(
    "TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
# Cheap hashing keeps the suite fast; production uses Werkzeug's scrypt defaults.
FAST_HASH = "scrypt:1024:8:1"

# Every boto3 Session parses botocore's S3 model and endpoint rules (megabytes of JSON) afresh,
# and the app builds a Session per app: most of an S3 app's start-up, repeated in every
# postgres-s3 test. One loader per test process parses them once; the parsed models are
# read-only data, which botocore already shares between the clients of one Session.
botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)


def base_config(**overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "TESTING": True,
        "PASSWORD_HASH_METHOD": FAST_HASH,
        "RATELIMIT_ENABLED": False,
        "APP_TIMEZONE": "UTC",
        "TOKEN_TTL_MINUTES": None,
        "ADMIN_EMAIL": None,
        "ADMIN_PASSWORD": None,
        # Statistics are flushed by the tests that read them (tests/stats), never by a thread.
        "STATS_BACKGROUND_FLUSH": False,
        # The mail outbox is sent by the tests that read it (tests/releases), never by a thread.
        "MAIL_BACKGROUND": False,
        # The DOI outbox is worked by the tests that read it (tests/doi), never by a thread.
        "DOI_BACKGROUND": False,
        # Covers are made by the tests that show them (tests/covers), never by a thread.
        "COVER_BACKGROUND": False,
    }
    config.update(overrides)
    return config


def migrate_database(url: str, tmp: Path) -> None:
    app = create_app(
        base_config(SQLALCHEMY_DATABASE_URI=url, STORAGE_LOCAL_ROOT=str(tmp / "unused"))
    )
    with app.app_context():
        upgrade()
        db.engine.dispose()


def create_account(url: str, tmp: Path, email: str, password: str) -> None:
    """An account in the migrated database at `url`, as `flask create-user` makes one, without
    starting a process for it."""
    app = create_app(base_config(SQLALCHEMY_DATABASE_URI=url, STORAGE_LOCAL_ROOT=str(tmp)))
    with app.app_context():
        create_user(email, email.partition("@")[0], password)
        db.engine.dispose()


# --- PostgreSQL -------------------------------------------------------------------------


def _postgres_unavailable_reason() -> str | None:
    engine = sa.create_engine(POSTGRES_URL)
    try:
        with engine.connect():
            return None
    except sa.exc.OperationalError as exc:
        return f"PostgreSQL is not reachable at {POSTGRES_URL}: {exc.orig}"
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def postgres_admin_url() -> str:
    reason = _postgres_unavailable_reason()
    if reason:
        if os.environ.get("REQUIRE_POSTGRES") == "1":
            pytest.fail(f"REQUIRE_POSTGRES=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return POSTGRES_URL


@pytest.fixture(scope="session")
def make_postgres_database(
    postgres_admin_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """Creates throwaway databases on the local server; drops them at the end of the session.

    `make()` gives an empty database; `make(migrated=True)` a copy of one migrated once for
    the session (copying takes a fraction of the seconds migrating takes). `make mutate`
    runs a session per mutant: it migrates one database for all of them and names it in
    TEST_POSTGRES_TEMPLATE.
    """
    admin = sa.create_engine(postgres_admin_url, isolation_level="AUTOCOMMIT")
    created: list[str] = []
    given = os.environ.get("TEST_POSTGRES_TEMPLATE")
    template: list[str] = [given] if given else []

    def make(migrated: bool = False) -> str:
        name = f"filerepo_test_{uuid.uuid4().hex[:12]}"
        if migrated and not template:
            url = make()
            migrate_database(url, Path(tmp_path_factory.mktemp("pg-template")))
            template.append(sa.make_url(url).database)
        copy = f' TEMPLATE "{template[0]}"' if migrated else ""
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"{copy}'))
        created.append(name)
        return sa.make_url(postgres_admin_url).set(database=name).render_as_string(False)

    yield make
    with admin.connect() as conn:
        for name in created:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session")
def postgres_url(make_postgres_database: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    url = make_postgres_database()
    migrate_database(url, tmp_path_factory.mktemp("pg-migrate"))
    return url


#: Rows a migration writes that the tests start from; every other table starts empty.
POSTGRES_SEEDED = {"alembic_version", "audit_chain_heads"}


@pytest.fixture(scope="session")
def empty_postgres(postgres_url: str) -> Iterator[Any]:
    """Empties the session's database as `TRUNCATE ... RESTART IDENTITY CASCADE` of every table
    would (the audit chains back at their start), for every postgres-s3 test.

    DELETE with triggers and foreign-key checks off instead: TRUNCATE gives every table and
    index new files, about ten times slower on the few rows a test leaves. Like TRUNCATE, it
    fires no row trigger (the count tables are emptied with the rest).
    """
    engine = sa.create_engine(postgres_url)
    with engine.connect() as conn:
        tables = conn.scalars(
            sa.text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        ).all()
        sequences = conn.scalars(
            sa.text("SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'")
        ).all()

    def empty() -> None:
        with engine.begin() as conn:
            conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
            for table in tables:
                if table not in POSTGRES_SEEDED:
                    conn.execute(sa.text(f'DELETE FROM "{table}"'))
            for sequence in sequences:
                conn.execute(sa.text(f'ALTER SEQUENCE "{sequence}" RESTART'))
            conn.execute(
                sa.text("UPDATE audit_chain_heads SET last_seq = 0, last_hash = :genesis"),
                {"genesis": "0" * 64},
            )

    yield empty
    engine.dispose()


# --- SQLite -----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One migrated database file, copied for every test (much faster than migrating).

    `make mutate` runs the tests once per mutant: it migrates one file for all of its runs
    and names it in TEST_SQLITE_TEMPLATE.
    """
    given = os.environ.get("TEST_SQLITE_TEMPLATE")
    if given:
        return Path(given)
    folder = tmp_path_factory.mktemp("sqlite-template")
    path = folder / "template.sqlite3"
    migrate_database(f"sqlite:///{path}", folder)
    return path


@pytest.fixture
def make_sqlite_app(tmp_path: Path, sqlite_template: Path) -> Iterator[Any]:
    """Builds apps on a migrated SQLite copy and local storage, for tests that need their own
    settings; every app's engine is disposed at the end of the test."""
    apps: list[Flask] = []

    def make(**overrides: Any) -> Flask:
        folder = tmp_path / f"app-{len(apps)}"
        folder.mkdir()
        shutil.copyfile(sqlite_template, folder / "db.sqlite3")
        config = base_config(
            SQLALCHEMY_DATABASE_URI=f"sqlite:///{folder / 'db.sqlite3'}",
            STORAGE_LOCAL_ROOT=str(folder / "storage"),
        )
        app = create_app({**config, **overrides})
        apps.append(app)
        return app

    yield make
    for app in apps:
        with app.app_context():
            db.engine.dispose()


# --- S3 ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.support.seaweedfs import start_seaweedfs

    server = start_seaweedfs(tmp_path_factory.mktemp("seaweedfs"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3_buckets(seaweedfs: Any) -> Iterator[Any]:
    """Empty buckets to reuse (`s3_bucket`), and an admin client; removed at the end.

    SeaweedFS gives every bucket a collection and grows it volumes on the first write, which
    takes a fifth of a second; a bucket emptied after a test costs a few requests instead.
    """
    client = seaweedfs.client()
    free: list[str] = []
    yield client, free
    for bucket in free:
        client.delete_bucket(Bucket=bucket)
    client.close()


def _emptied_for_reuse(client: Any, bucket: str) -> bool:
    """Removes what a test left in `bucket` (objects, unfinished multipart uploads); whether
    it is now as a new bucket is. One the test removed or gave a policy is not reused."""
    from botocore.exceptions import ClientError

    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for item in page.get("Contents", []):
                client.delete_object(Bucket=bucket, Key=item["Key"])
        for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=bucket):
            for upload in page.get("Uploads", []):
                client.abort_multipart_upload(
                    Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                )
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "NoSuchBucket":
            return False
        raise
    try:
        client.get_bucket_policy(Bucket=bucket)
        has_policy = True
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "NoSuchBucketPolicy":
            raise
        has_policy = False
    left = client.list_objects_v2(Bucket=bucket, MaxKeys=1).get("KeyCount", 0)
    unfinished = client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    if has_policy or left or unfinished:
        # Removing the bucket frees the volumes SeaweedFS gave its collection.
        client.delete_bucket_policy(Bucket=bucket)
        client.delete_bucket(Bucket=bucket)
        return False
    return True


@pytest.fixture
def s3_bucket(
    seaweedfs: Any, s3_buckets: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    """An empty bucket of the session's SeaweedFS (a new one, or one an earlier test used and
    that was emptied: no objects, no unfinished uploads, no policy) and its settings."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweedfs.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweedfs.secret_key)
    client, free = s3_buckets
    if free:
        bucket = free.pop()
    else:
        bucket = f"test-{uuid.uuid4().hex[:16]}"
        client.create_bucket(Bucket=bucket)
    yield {
        "STORAGE_BACKEND": "s3",
        "S3_BUCKET": bucket,
        "S3_ENDPOINT_URL": seaweedfs.endpoint_url,
        "S3_REGION": seaweedfs.region,
    }
    if _emptied_for_reuse(client, bucket):
        free.append(bucket)


@pytest.fixture
def postgres_s3_env(make_postgres_database, s3_bucket: dict, seaweedfs) -> dict[str, str]:
    """Settings for app processes on a fresh PostgreSQL database and this test's bucket."""
    return {
        "DATABASE_URL": make_postgres_database(),
        "STORAGE_BACKEND": "s3",
        "S3_BUCKET": s3_bucket["S3_BUCKET"],
        "S3_ENDPOINT_URL": s3_bucket["S3_ENDPOINT_URL"],
        "S3_REGION": s3_bucket["S3_REGION"],
        "AWS_ACCESS_KEY_ID": seaweedfs.access_key,
        "AWS_SECRET_ACCESS_KEY": seaweedfs.secret_key,
    }


# --- the stacks -------------------------------------------------------------------------

STACKS = [
    "sqlite-local",
    pytest.param("postgres-s3", marks=[pytest.mark.postgres, pytest.mark.s3server]),
]


@pytest.fixture(params=STACKS)
def stack_config(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    if request.param == "sqlite-local":
        template = request.getfixturevalue("sqlite_template")
        db_path = tmp_path / "db.sqlite3"
        shutil.copyfile(template, db_path)
        return base_config(
            SQLALCHEMY_DATABASE_URI=f"sqlite:///{db_path}",
            STORAGE_BACKEND="local",
            STORAGE_LOCAL_ROOT=str(tmp_path / "storage"),
        )
    url = request.getfixturevalue("postgres_url")
    request.getfixturevalue("empty_postgres")()
    return base_config(SQLALCHEMY_DATABASE_URI=url, **request.getfixturevalue("s3_bucket"))


@pytest.fixture
def app(stack_config: dict[str, Any]) -> Iterator[Flask]:
    app = create_app(stack_config)
    yield app
    with app.app_context():
        db.engine.dispose()


@pytest.fixture
def client(app: Flask) -> Any:
    """Checks every response against the OpenAPI document (tests/support/openapi_client.py)."""
    app.test_client_class = OpenAPIValidatingClient
    return app.test_client()


@pytest.fixture
def runner(app: Flask) -> Any:
    return app.test_cli_runner()


# Accounts and helpers of the HTTP tests, for every folder (tests/files, tests/auth, ...).


@pytest.fixture
def api(app: Flask, client: Any) -> Api:
    return Api(app, client)


@pytest.fixture
def alice(api: Api) -> Account:
    return api.account("alice@example.org")


@pytest.fixture
def bob(api: Api) -> Account:
    return api.account("bob@example.org")


@pytest.fixture
def admin(api: Api) -> Account:
    return api.account("admin@example.org", admin=True)


@pytest.fixture
def redis_url() -> str:
    """Redis on 127.0.0.1:6379 (for several processes' rate limits and statistics)."""
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=1).close()
    except OSError:
        reason = "Redis is not reachable at 127.0.0.1:6379"
        if os.environ.get("REQUIRE_REDIS") == "1":
            pytest.fail(f"REQUIRE_REDIS=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return "redis://127.0.0.1:6379/0"


@pytest.fixture
def replicas(make_postgres_database: Any, tmp_path: Path) -> Iterator[Replicas]:
    """Two apps on one fresh, migrated PostgreSQL database (two server processes)."""
    from tests.support.replicas import Replicas  # it imports this module

    url = make_postgres_database(migrated=True)
    replicas = Replicas(url, tmp_path)
    yield replicas
    replicas.close()
