"""`flask storage check`: is the configured storage reachable, writable and private, and are
the S3 credentials no stronger than the service needs?

The probe object lives under its own prefix (`healthcheck/`), never among the records' keys,
and is removed again whatever the outcome; so is the probe bucket of the privilege check.
"""

from __future__ import annotations

import stat
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from flask import Flask, current_app
from flask.cli import with_appcontext

from app.storage import LocalStorage, Storage, StorageError

PROBE_PREFIX = "healthcheck/"
#: Permission bits for "other users" on the storage root.
_OTHERS = stat.S_IROTH | stat.S_IWOTH | stat.S_IXOTH


#: Other buckets the privilege check tries to list and read, at most.
OTHER_BUCKETS_TRIED = 5


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    #: Passed, but with a finding an operator should act on (printed as `warn`).
    warning: bool = False

    @property
    def status(self) -> str:
        if not self.ok:
            return "fail"
        return "warn" if self.warning else "ok"


class _Probe:
    """A small object written under `healthcheck/` to test writes and anonymous access."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.key = f"{PROBE_PREFIX}{uuid.uuid4()}"
        self.content = f"storage check {self.key}\n".encode()
        self.stored = False

    def write_and_read_back(self) -> None:
        with self.storage.writer(self.key) as writer:
            writer.write(self.content)
            writer.commit()
        self.stored = True
        with self.storage.open(self.key) as reader:
            if reader.read_all() != self.content:
                raise StorageError(f"reading {self.key} back gave different bytes")

    def remove(self) -> None:
        self.storage.delete(self.key)
        if self.storage.exists(self.key):
            raise StorageError(f"{self.key} is still there after deleting it")
        self.stored = False


def check_storage(app: Flask, storage: Storage) -> list[CheckResult]:
    """Run the checks in order; each later check says why it could not run."""
    from app.storage.s3 import S3Storage

    results = _check_storage(app, storage)
    if isinstance(storage, S3Storage):
        if results[0].ok:
            results.append(_s3_privileges(storage))
        else:
            results.append(
                CheckResult("privileges", False, "not checked: storage is not reachable")
            )
    return results


def _check_storage(app: Flask, storage: Storage) -> list[CheckResult]:
    results = [_run("reachable", lambda: _reachable(storage))]
    if not results[0].ok:
        results.append(CheckResult("writable", False, "not checked: storage is not reachable"))
        results.append(_run("private", lambda: _private(app, storage, None)))
        return results
    probe = _Probe(storage)
    try:
        writable = _run("writable", lambda: _write(probe))
        results.append(writable)
        written = probe if writable.ok else None
        results.append(_run("private", lambda: _private(app, storage, written)))
    finally:
        if probe.stored:
            # The write worked but something after it failed; do not leave the probe behind.
            try:
                storage.delete(probe.key)
            except StorageError:
                pass
    return results


def _run(name: str, check: Callable[[], str]) -> CheckResult:
    try:
        return CheckResult(name, True, check())
    except (StorageError, OSError) as exc:
        return CheckResult(name, False, str(exc) or type(exc).__name__)


def _reachable(storage: Storage) -> str:
    storage.check()
    return repr(storage)


def _write(probe: _Probe) -> str:
    probe.write_and_read_back()
    # A failure to delete fails the check; check_storage still tries again at the end.
    probe.remove()
    return f"wrote, read back and deleted {probe.key}"


def _private(app: Flask, storage: Storage, probe: _Probe | None) -> str:
    if isinstance(storage, LocalStorage):
        return _local_private(app, storage)
    from app.storage.s3 import S3Storage

    if isinstance(storage, S3Storage):
        if probe is None:
            raise StorageError("not checked: it needs the probe object, which was not written")
        return _s3_private(storage, probe)
    raise StorageError(f"not checked: no privacy check for {type(storage).__name__}")


# --- local folder -----------------------------------------------------------------------


def _static_folders(app: Flask) -> list[Path]:
    folders = [app.static_folder, *(bp.static_folder for bp in app.blueprints.values())]
    return [Path(folder).resolve() for folder in folders if folder]


def _local_private(app: Flask, storage: LocalStorage) -> str:
    root = storage.root.resolve()
    mode = stat.S_IMODE(root.stat().st_mode)
    if mode & _OTHERS:
        raise StorageError(
            f"the folder {root} is open to other users (mode {mode:04o}); run: chmod o-rwx {root}"
        )
    for static in _static_folders(app):
        if root == static or static in root.parents:
            raise StorageError(f"the folder {root} is inside the static folder {static}")
    return f"folder {root} has mode {mode:04o} and is outside the static folders"


# --- S3 ---------------------------------------------------------------------------------


def _anonymous_client(storage: Any) -> Any:
    """A client like the service's, but sending unsigned (anonymous) requests."""
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config

    meta = storage.client.meta
    config = meta.config.merge(
        Config(signature_version=UNSIGNED, retries={"mode": "standard", "total_max_attempts": 1})
    )
    return boto3.session.Session().client(
        "s3", endpoint_url=meta.endpoint_url, region_name=meta.region_name, config=config
    )


def _refused(call: Callable[[], Any], allowed: str) -> str:
    """Run an anonymous request; fine if it is refused, an error if it is served."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        call()
    except ClientError as exc:
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        code = exc.response.get("Error", {}).get("Code", "")
        if status in (401, 403):
            return f"{status} {code}".strip()
        raise StorageError(
            f"an anonymous request answered {status or '?'} {code}, not 401/403"
        ) from exc
    except BotoCoreError as exc:
        raise StorageError(f"could not send an anonymous request: {exc}") from exc
    raise StorageError(allowed)


def _s3_private(storage: Any, probe: _Probe) -> str:
    # The probe was deleted by the write check; put it back for the anonymous read.
    with storage.writer(probe.key) as writer:
        writer.write(probe.content)
        writer.commit()
    probe.stored = True
    client = _anonymous_client(storage)
    try:
        read = _refused(
            lambda: client.get_object(Bucket=storage.bucket, Key=probe.key)["Body"].read(),
            "bucket allows anonymous reads",
        )
        listing = _refused(
            lambda: client.list_objects_v2(Bucket=storage.bucket, MaxKeys=1),
            "bucket allows anonymous listing",
        )
    finally:
        client.close()
    return f"anonymous read refused ({read}), anonymous listing refused ({listing})"


def _allowed(call: Callable[[], Any], *allowed_codes: str) -> bool | None:
    """True if the service's credentials may make this request (it succeeded, or failed with
    one of `allowed_codes`, which S3 answers only after the permission check), False if it was
    refused, None if the answer says neither."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        call()
    except ClientError as exc:
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        code = exc.response.get("Error", {}).get("Code", "")
        if code in allowed_codes:
            return True
        if status in (401, 403):
            return False
        return None
    except BotoCoreError:
        return None
    return True


def _other_buckets(client: Any, own: str) -> list[str] | None:
    """Names of the other buckets the credentials can see, None when listing is refused."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        buckets = client.list_buckets().get("Buckets", [])
    except (BotoCoreError, ClientError):
        return None
    return sorted(bucket["Name"] for bucket in buckets if bucket["Name"] != own)


def _rights_on_other_bucket(client: Any, name: str) -> list[str]:
    listing: dict[str, Any] = {}

    def list_one() -> None:
        listing.update(client.list_objects_v2(Bucket=name, MaxKeys=1))

    rights = ["list bucket " + name] if _allowed(list_one) else []
    contents = listing.get("Contents", [])
    if contents:
        key = contents[0]["Key"]
        if _allowed(lambda: client.head_object(Bucket=name, Key=key)):
            rights.append("read objects in bucket " + name)
    return rights


def _probe_bucket_name(own: str) -> str:
    # Bucket names: 3-63 lowercase letters, digits and hyphens.
    return f"{own[:30].rstrip('-.')}-check-{uuid.uuid4().hex[:16]}".lower()


def _s3_privileges(storage: Any) -> CheckResult:
    """Warn about every right the credentials have beyond the service's own bucket.

    The service needs get, put, delete and list on its bucket and the multipart actions;
    anything more turns a leaked secret into more than this service's data: listing every
    bucket, listing or reading another bucket, creating buckets (tried with a probe bucket
    that is deleted at once).
    """
    from botocore.exceptions import BotoCoreError, ClientError

    client = storage.client
    excess: list[str] = []
    others = _other_buckets(client, storage.bucket) or []
    if others:
        excess.append(f"list all buckets (sees {len(others)} more)")
        for name in others[:OTHER_BUCKETS_TRIED]:
            excess.extend(_rights_on_other_bucket(client, name))
    probe = _probe_bucket_name(storage.bucket)
    where: dict[str, Any] = {}
    region = client.meta.region_name
    if region and region != "us-east-1":
        # Outside us-east-1, AWS refuses a bucket without its region before any permission check.
        where["CreateBucketConfiguration"] = {"LocationConstraint": region}
    created = _allowed(
        lambda: client.create_bucket(Bucket=probe, **where), "BucketAlreadyOwnedByYou"
    )
    if created:
        excess.append("create buckets")
        try:
            client.delete_bucket(Bucket=probe)
        except (BotoCoreError, ClientError) as exc:
            return CheckResult(
                "privileges",
                False,
                f"created the probe bucket {probe} and could not delete it ({exc}); "
                "delete it by hand",
            )
    if excess:
        return CheckResult(
            "privileges",
            True,
            "the credentials can do more than the service needs: "
            + ", ".join(excess)
            + f"; give the service a user limited to the bucket {storage.bucket}"
            " (see docker-compose.yml, app-bucket-policy)",
            warning=True,
        )
    untested = "" if created is False else " (bucket creation: no clear answer)"
    return CheckResult(
        "privileges",
        True,
        "no other bucket visible, creating buckets refused" + untested,
    )


# --- the command ------------------------------------------------------------------------


@click.group("storage")
def storage_group() -> None:
    """Inspect the configured file storage."""


@storage_group.command("check")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@with_appcontext
def check_command(strict: bool) -> None:
    """Check that the storage is reachable, writable and private.

    \b
    reachable   the folder or bucket answers (Storage.check())
    writable    a small object under healthcheck/ is written, read back and deleted
    private     local: the folder has no permissions for other users and is not inside a
                static folder; S3: unsigned (anonymous) reads and listings are refused
    privileges  S3 only: warns when the credentials can do more than the service needs
                (list all buckets, list or read another bucket, create a bucket: tried
                with a probe bucket that is deleted at once)

    Prints one line per check, `ok`, `warn` or `fail` with the reason; exits 1 if any check
    fails (with --strict also on a warning).
    """
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    results = check_storage(app, app.extensions["storage"])
    for result in results:
        click.echo(f"{result.name:<10} {result.status:<4}  {result.detail}")
    if not all(result.ok and not (strict and result.warning) for result in results):
        raise click.exceptions.Exit(1)
