"""`flask storage check` on a local folder and on a real S3 server (SeaweedFS)."""

from __future__ import annotations

import json
from pathlib import Path

from app import create_app
from app.extensions import db
from app.storage import LocalStorage
from tests.ops.helpers import LOCAL_ONLY, S3_ONLY, check_lines, storage_keys


def make_private(app) -> None:
    storage = app.extensions["storage"]
    if isinstance(storage, LocalStorage):
        storage.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        storage.root.chmod(0o700)


def test_help_names_every_check(runner):
    result = runner.invoke(args=["storage", "check", "--help"])
    assert result.exit_code == 0
    for word in ("reachable", "writable", "private", "healthcheck/", "anonymous"):
        assert word in result.output


def test_a_healthy_storage_passes_every_check(app, runner):
    make_private(app)
    result = runner.invoke(args=["storage", "check"])
    assert result.exit_code == 0, result.output
    checks = check_lines(result)
    assert list(checks) == ["reachable", "writable", "private"]
    assert all(value.startswith("ok") for value in checks.values()), result.output
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
