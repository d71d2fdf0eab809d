"""The backup and restore drill of docs/operations.md, on PostgreSQL and a real S3 server.

Back up as the document says (the database first with pg_dump, then every object of the
bucket), lose everything (the database dropped, the bucket emptied and removed), restore both,
and check what users would notice: `flask storage reconcile` finds no record without its
object, `flask storage verify` finds every SHA-256 intact, and every download and record is
exactly what it was, with the tokens issued before the backup.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask

from app import create_app
from app.extensions import db
from app.ops.reconcile import reconcile_command, verify_command
from tests.conftest import base_config, migrate_database
from tests.support import samples
from tests.support.api import Account, Api
from tests.support.openapi_client import OpenAPIValidatingClient

pytestmark = [pytest.mark.postgres, pytest.mark.s3server]


def libpq_url(sqlalchemy_url: str) -> str:
    """The database URL as pg_dump and pg_restore take it (no `+psycopg` driver part)."""
    return sa.make_url(sqlalchemy_url).set(drivername="postgresql").render_as_string(False)


def start(config: dict[str, Any]) -> tuple[Flask, Api]:
    app = create_app(config)
    app.test_client_class = OpenAPIValidatingClient
    return app, Api(app, app.test_client())


def stop(app: Flask) -> None:
    app.extensions["storage"].close()
    with app.app_context():
        db.engine.dispose()


def snapshot(api: Api, owners: dict[str, Account]) -> dict[str, tuple[Any, bytes]]:
    """Every record as its owner sees it, with the bytes its download answers."""
    seen = {}
    for record_id, owner in owners.items():
        record = api.get(f"/api/files/{record_id}", owner)
        download = api.get(f"/api/files/{record_id}/download", owner)
        assert record.status_code == 200 and download.status_code == 200
        seen[record_id] = (record.get_json(), download.data)
    return seen


def copy_bucket(client: Any, bucket: str, folder: Path) -> list[str]:
    """Download every object to `folder`, one file per key (what `mc mirror` does)."""
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            target = folder / item["Key"]
            target.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(bucket, item["Key"], str(target))
            keys.append(item["Key"])
    return keys


def empty_and_remove_bucket(client: Any, bucket: str) -> None:
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            client.delete_object(Bucket=bucket, Key=item["Key"])
    client.delete_bucket(Bucket=bucket)


def run(*command: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{command[0]}: {result.stderr}"


def test_backup_drill_restores_every_record_and_every_byte(
    make_postgres_database, postgres_admin_url, s3_bucket, seaweedfs, tmp_path: Path
):
    url = make_postgres_database()
    migrate_database(url, tmp_path)
    config = base_config(SQLALCHEMY_DATABASE_URI=url, **s3_bucket)
    bucket = s3_bucket["S3_BUCKET"]
    app, api = start(config)

    alice, bob = api.account("alice@example.org"), api.account("bob@example.org", admin=True)
    owners = {}
    for owner, name, data, metadata in [
        (alice, "report.pdf", samples.pdf_bytes(), {"path": "reports/2026"}),
        (alice, "table.csv", b"year,count\n2025,1\n2026,2\n", {"freigabe": "true"}),
        (bob, "picture.png", samples.png_bytes(), {}),
        (bob, "notes.txt", b"line of notes\n" * 200_000, {"path": "notes"}),
    ]:
        owners[api.create(owner, name, data, **metadata)["id"]] = owner
    replaced = next(iter(owners))
    assert api.replace(alice, replaced, "report-v2.pdf", samples.pdf_bytes()).status_code == 200
    gone = api.create(alice, "gone.txt", b"deleted before the backup\n")["id"]
    assert api.delete(gone, alice).status_code == 204
    before = snapshot(api, owners)

    # 1. The database first, 2. then the bucket: every key in the dump is in the copy.
    dump = tmp_path / "files.dump"
    run("pg_dump", "--format=custom", "--no-owner", f"--file={dump}", libpq_url(url))
    # An upload in the window between the two copies: its object is copied, its record is not.
    late = api.create(bob, "late.txt", b"uploaded while the bucket was being copied\n")
    late_key = api.row(late["id"]).stored_path
    objects = tmp_path / "objects"
    admin = seaweedfs.client()
    try:
        copied = copy_bucket(admin, bucket, objects)
        assert late_key in copied and len(copied) == len(owners) + 1
        stop(app)

        # Everything is lost.
        database = sa.make_url(url).database
        engine = sa.create_engine(postgres_admin_url, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE "{database}" WITH (FORCE)'))
        empty_and_remove_bucket(admin, bucket)

        # Restore: an empty database and bucket, then pg_restore and the objects back.
        with engine.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{database}"'))
        engine.dispose()
        run("pg_restore", "--no-owner", "--exit-on-error", f"--dbname={libpq_url(url)}", str(dump))
        admin.create_bucket(Bucket=bucket)
        for path in sorted(p for p in objects.rglob("*") if p.is_file()):
            admin.upload_file(str(path), bucket, path.relative_to(objects).as_posix())
    finally:
        admin.close()

    app, api = start(config)
    try:
        runner = app.test_cli_runner()
        report = runner.invoke(reconcile_command, ["--grace-minutes", "0"])
        assert report.exit_code == 0, report.output
        assert "records without objects: 0" in report.output
        assert f"orphaned object {late_key}" in report.output
        assert "orphaned objects: 1 (run with --fix to remove)" in report.output

        fixed = runner.invoke(reconcile_command, ["--fix", "--grace-minutes", "0"])
        assert fixed.exit_code == 0, fixed.output
        assert api.objects() == {api.row(record_id).stored_path for record_id in owners}

        verified = runner.invoke(verify_command, [])
        assert verified.exit_code == 0, verified.output
        assert f"checked {len(owners)} records" in verified.output

        assert snapshot(api, owners) == before
        assert api.get(f"/api/files/{gone}", alice).status_code == 404
        assert api.get(f"/api/files/{late['id']}", bob).status_code == 404
    finally:
        stop(app)
