"""`flask storage check` on a local folder and on a real S3 server (SeaweedFS)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app import create_app
from app.extensions import db
from app.storage import LocalStorage
from app.storage.s3 import S3Storage
from tests.ops.helpers import LOCAL_ONLY, S3_ONLY, check_lines, storage_keys


def make_private(app) -> None:
    storage = app.extensions["storage"]
    if isinstance(storage, LocalStorage):
        storage.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        storage.root.chmod(0o700)


def test_help_names_every_check(runner):
    result = runner.invoke(args=["storage", "check", "--help"])
    assert result.exit_code == 0
    for word in ("reachable", "writable", "private", "privileges", "healthcheck/", "anonymous"):
        assert word in result.output


def test_a_healthy_storage_passes_every_check(app, runner):
    make_private(app)
    result = runner.invoke(args=["storage", "check"])
    assert result.exit_code == 0, result.output
    checks = check_lines(result)
    on_s3 = isinstance(app.extensions["storage"], S3Storage)
    assert list(checks) == ["reachable", "writable", "private"] + ["privileges"] * on_s3
    for name in ("reachable", "writable", "private"):
        assert checks[name].startswith("ok"), result.output
    assert "wrote, read back and deleted healthcheck/" in checks["writable"]
    assert storage_keys(app) == set()


def test_the_probe_does_not_touch_stored_files(app, runner, api):
    make_private(app)
    alice = api.account("alice@example.org")
    record = api.create(alice)
    before = storage_keys(app)
    result = runner.invoke(args=["storage", "check"])
    assert result.exit_code == 0, result.output
    assert storage_keys(app) == before
    assert api.get(f"/api/files/{record['id']}/download", alice).status_code == 200


# --- local folder -----------------------------------------------------------------------


@LOCAL_ONLY
def test_a_folder_readable_by_others_is_not_private(app, runner):
    make_private(app)
    root = app.extensions["storage"].root
    root.chmod(0o755)
    result = runner.invoke(args=["storage", "check"])
    assert result.exit_code == 1
    checks = check_lines(result)
    assert checks["reachable"].startswith("ok")
    assert checks["writable"].startswith("ok")
    assert checks["private"] == (
        f"fail  the folder {root} is open to other users (mode 0755); run: chmod o-rwx {root}"
    )


@LOCAL_ONLY
def test_a_folder_inside_the_static_folder_is_not_private(app, runner, tmp_path: Path):
    static = tmp_path / "static"
    static.mkdir()
    app.static_folder = str(static)
    app.extensions["storage"] = LocalStorage(static / "files")
    (static / "files").mkdir(mode=0o700)
    result = runner.invoke(args=["storage", "check"])
    assert result.exit_code == 1
    checks = check_lines(result)
    assert checks["private"] == (
        f"fail  the folder {static / 'files'} is inside the static folder {static}"
    )


@LOCAL_ONLY
def test_an_unusable_folder_fails_every_check(app, runner, tmp_path: Path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    app.extensions["storage"] = LocalStorage(blocker)
    result = runner.invoke(args=["storage", "check"])
    assert result.exit_code == 1
    checks = check_lines(result)
    assert checks["reachable"].startswith(f"fail  local storage folder '{blocker}' is not writable")
    assert checks["writable"] == "fail  not checked: storage is not reachable"
    assert checks["private"].startswith("fail")


# --- S3 ---------------------------------------------------------------------------------


def _set_policy(app, seaweedfs, actions: list[str], resource: str) -> None:
    bucket = app.config["S3_BUCKET"]
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": actions,
                "Resource": [resource.format(bucket=bucket)],
            }
        ],
    }
    client = seaweedfs.client()
    try:
        client.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))
    finally:
        client.close()


@S3_ONLY
def test_a_bucket_with_anonymous_reads_is_not_private(app, runner, seaweedfs):
    _set_policy(app, seaweedfs, ["s3:GetObject"], "arn:aws:s3:::{bucket}/*")
    result = runner.invoke(args=["storage", "check"])
    assert result.exit_code == 1, result.output
    checks = check_lines(result)
    assert checks["reachable"].startswith("ok")
    assert checks["writable"].startswith("ok")
    assert checks["private"] == "fail  bucket allows anonymous reads"
    assert storage_keys(app) == set()


@S3_ONLY
def test_a_bucket_with_anonymous_listing_is_not_private(app, runner, seaweedfs):
    _set_policy(app, seaweedfs, ["s3:ListBucket"], "arn:aws:s3:::{bucket}")
    result = runner.invoke(args=["storage", "check"])
    assert result.exit_code == 1, result.output
    assert check_lines(result)["private"] == "fail  bucket allows anonymous listing"
    assert storage_keys(app) == set()


@S3_ONLY
def test_a_private_bucket_refuses_anonymous_requests(app, runner):
    result = runner.invoke(args=["storage", "check"])
    assert result.exit_code == 0, result.output
    assert check_lines(result)["private"] == (
        "ok    anonymous read refused (403 AccessDenied), "
        "anonymous listing refused (403 AccessDenied)"
    )


@S3_ONLY
def test_a_missing_bucket_fails_every_check(stack_config):
    app = create_app({**stack_config, "S3_BUCKET": "no-such-bucket-here"})
    try:
        result = app.test_cli_runner().invoke(args=["storage", "check"])
    finally:
        with app.app_context():
            db.engine.dispose()
    assert result.exit_code == 1
    checks = check_lines(result)
    assert "the bucket does not exist" in checks["reachable"]
    assert checks["writable"] == "fail  not checked: storage is not reachable"
    assert checks["private"] == (
        "fail  not checked: it needs the probe object, which was not written"
    )


# --- S3 credentials stronger than the service needs ---------------------------------------

#: Buckets on the dedicated server: the service's own, and one that belongs to someone else.
OWN, OTHER = "files-app", "other-data"
#: Identities of that server, in SeaweedFS's -s3.config format; the admin identity is added
#: by start_seaweedfs. "service" is the least-privilege user docker-compose.yml gives the app.
RIGHTS = {
    "service": [f"Read:{OWN}", f"Write:{OWN}", f"List:{OWN}"],
    "nosy": [f"Read:{OWN}", f"Write:{OWN}", f"List:{OWN}", f"Read:{OTHER}", f"List:{OTHER}"],
}


@pytest.fixture(scope="module")
def restricted_seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A SeaweedFS of its own with identities limited per bucket, and the two buckets."""
    from tests.support.seaweedfs import start_seaweedfs_with_rights

    server = start_seaweedfs_with_rights(tmp_path_factory.mktemp("seaweedfs-iam"), RIGHTS)
    server.keys = {**server.keys, "admin": (server.access_key, server.secret_key)}
    admin = server.client()
    try:
        admin.create_bucket(Bucket=OWN)
        admin.create_bucket(Bucket=OTHER)
        admin.put_object(Bucket=OTHER, Key="payroll.csv", Body=b"name,salary\n")
        yield server
    finally:
        admin.close()
        server.stop()


@pytest.fixture
def check_as(restricted_seaweedfs, make_sqlite_app, monkeypatch):
    """Run `flask storage check` (with extra arguments) as one identity on the own bucket."""
    server = restricted_seaweedfs

    def run(identity: str, *args: str) -> Any:
        access_key, secret_key = server.keys[identity]
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", access_key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret_key)
        app = make_sqlite_app(**server.storage_config(OWN))
        return app.test_cli_runner().invoke(args=["storage", "check", *args])

    return run


def bucket_names(server) -> list[str]:
    admin = server.client()
    try:
        return sorted(bucket["Name"] for bucket in admin.list_buckets()["Buckets"])
    finally:
        admin.close()


@pytest.mark.s3server
def test_the_least_privilege_user_passes_without_a_warning(check_as):
    result = check_as("service", "--strict")
    assert result.exit_code == 0, result.output
    checks = check_lines(result)
    assert list(checks) == ["reachable", "writable", "private", "privileges"]
    assert all(value.startswith("ok ") for value in checks.values()), result.output
    assert checks["privileges"] == "ok    no other bucket visible, creating buckets refused"


@pytest.mark.s3server
def test_the_least_privilege_user_can_do_all_the_service_does(
    restricted_seaweedfs, make_sqlite_app, monkeypatch
):
    """Uploads in one and in several parts, reads, listing, owed deletions and the clean-up
    of unfinished multipart uploads all work with the service's rights alone."""
    access_key, secret_key = restricted_seaweedfs.keys["service"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret_key)
    app = make_sqlite_app(**restricted_seaweedfs.storage_config(OWN))
    storage = app.extensions["storage"]
    big = secrets.token_bytes(2 * storage.part_size + 123)
    for key, content in (("files/small", b"small"), ("files/big", big)):
        with storage.writer(key) as writer:
            writer.write(content)
            writer.commit()
        with storage.open(key) as reader:
            assert reader.read_all() == content
    storage.client.create_multipart_upload(Bucket=OWN, Key="files/unfinished")
    result = app.test_cli_runner().invoke(
        args=["storage", "reconcile", "--fix", "--grace-minutes", "0"]
    )
    assert result.exit_code == 0, result.output
    assert "abandoned unfinished uploads removed: 1" in result.output
    assert "orphaned objects: 2 (removed 2)" in result.output
    assert storage.client.list_multipart_uploads(Bucket=OWN).get("Uploads", []) == []
    assert storage_keys(app) == set()


@pytest.mark.s3server
def test_credentials_that_read_another_bucket_get_a_warning(check_as):
    result = check_as("nosy")
    assert result.exit_code == 0, result.output
    privileges = check_lines(result)["privileges"]
    assert privileges.startswith("warn  the credentials can do more than the service needs: ")
    assert f"read objects in bucket {OTHER}" in privileges
    assert f"list bucket {OTHER}" in privileges
    assert "create buckets" not in privileges
    assert check_as("nosy", "--strict").exit_code == 1


@pytest.mark.s3server
def test_administrator_credentials_get_a_warning_and_leave_no_probe_bucket(
    check_as, restricted_seaweedfs
):
    before = bucket_names(restricted_seaweedfs)
    result = check_as("admin")
    assert result.exit_code == 0, result.output
    privileges = check_lines(result)["privileges"]
    assert privileges.startswith("warn  the credentials can do more than the service needs: ")
    assert "create buckets" in privileges
    assert f"read objects in bucket {OTHER}" in privileges
    assert privileges.endswith(
        f"give the service a user limited to the bucket {OWN} "
        "(see docker-compose.yml, app-bucket-policy)"
    )
    assert bucket_names(restricted_seaweedfs) == before


@pytest.mark.parametrize("region", ["us-east-1", "eu-central-1"])
def test_bucket_creation_is_tried_in_the_storage_region(region, monkeypatch, tmp_path):
    """AWS (moto here) refuses a bucket without its region outside us-east-1; the probe names
    it, so full rights are still recognised, and the probe bucket is gone afterwards."""
    from moto import mock_aws

    from app.ops.storage_check import _s3_privileges
    from app.storage.s3 import build_s3_client
    from tests.storage.helpers import use_credentials

    use_credentials(monkeypatch, tmp_path, "testing", "testing")
    with mock_aws():
        client = build_s3_client(region=region)
        where = {} if region == "us-east-1" else {"LocationConstraint": region}
        client.create_bucket(
            Bucket="files", **({"CreateBucketConfiguration": where} if where else {})
        )
        storage = S3Storage(client, "files")
        try:
            result = _s3_privileges(storage)
            assert result.status == "warn", result.detail
            assert result.detail.endswith(
                "create buckets; give the service a user limited to the bucket files "
                "(see docker-compose.yml, app-bucket-policy)"
            )
            assert [b["Name"] for b in client.list_buckets()["Buckets"]] == ["files"]
        finally:
            storage.close()
