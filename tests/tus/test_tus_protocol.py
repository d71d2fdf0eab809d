"""The tus endpoints through the test client, every answer checked against the OpenAPI
document: the protocol's refusals, and failures while an upload completes."""

from __future__ import annotations

import base64
import errno
import hashlib
import tempfile

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from app import create_app
from app.extensions import db
from app.files import writes as files
from app.models import ResumableUpload
from tests.support.api import Account, Api

TUS = {"Tus-Resumable": "1.0.0"}
OFFSET_TYPE = "application/offset+octet-stream"
TEXT = b"Ein Bericht, Zeile fuer Zeile.\n" * 1000


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def create(api: Api, account: Account, length: int = len(TEXT), **metadata: str):
    pairs = {"filename": "bericht.txt", **metadata}
    return api.client.post(
        "/api/uploads",
        headers={
            **TUS,
            **account.auth,
            "Upload-Length": str(length),
            "Upload-Metadata": ",".join(f"{k} {_b64(v)}" for k, v in pairs.items()),
        },
    )


def patch(api: Api, account: Account, url: str, body: bytes, offset: int = 0, **headers):
    return api.client.patch(
        url,
        data=body,
        headers={**TUS, **account.auth, "Upload-Offset": str(offset), **headers},
        content_type=OFFSET_TYPE,
    )


def spooled(api: Api, account: Account, url: str, body: bytes, offset: int = 0, **headers):
    """A PATCH whose body is a file, as waitress hands over every body over 512 KiB."""
    with tempfile.TemporaryFile() as spool:
        spool.write(body)
        spool.seek(0)
        return api.client.patch(
            url,
            input_stream=spool,
            content_length=len(body),
            headers={**TUS, **account.auth, "Upload-Offset": str(offset), **headers},
            content_type=OFFSET_TYPE,
        )


def _checksum(algorithm: str, body: bytes) -> dict[str, str]:
    digest = base64.b64encode(hashlib.new(algorithm, body).digest()).decode()
    return {"Upload-Checksum": f"{algorithm} {digest}"}


def uploads(api: Api) -> int:
    with api.app.app_context():
        return db.session.scalar(select(func.count()).select_from(ResumableUpload))


def test_the_protocol_refusals(api: Api, alice: Account, bob: Account):
    created = create(api, alice)
    assert created.status_code == 201
    url = created.headers["Location"]
    assert created.headers["Upload-Offset"] == "0" and "Upload-Expires" in created.headers
    assert patch(api, alice, url, TEXT[:10], offset=5).status_code == 409
    wrong_type = api.client.patch(
        url,
        data=TEXT,
        headers={**TUS, **alice.auth, "Upload-Offset": "0"},
        content_type="application/octet-stream",
    )
    assert wrong_type.status_code == 415
    assert patch(api, alice, url, TEXT + b"more").status_code == 413
    bad_sum = patch(api, alice, url, TEXT, **{"Upload-Checksum": "crc32 AAAA"})
    assert bad_sum.status_code == 400
    assert api.client.head(url, headers={**alice.auth}).status_code == 412
    assert api.client.head(url, headers={**TUS, **bob.auth}).status_code == 404
    assert api.client.head(url, headers=TUS).status_code == 401
    # Nothing of the refused bodies was kept.
    state = api.client.head(url, headers={**TUS, **alice.auth})
    assert state.status_code == 200 and state.headers["Upload-Offset"] == "0"
    checksum = base64.b64encode(hashlib.sha1(TEXT).digest()).decode()
    done = patch(api, alice, url, TEXT, **{"Upload-Checksum": f"sha1 {checksum}"})
    assert done.status_code == 204
    record_id = done.headers["Upload-Record-Id"]
    assert done.headers["Location"] == f"/api/files/{record_id}"
    download = api.get(f"/api/files/{record_id}/download", alice)
    assert download.data == TEXT
    assert patch(api, alice, url, b"x", offset=len(TEXT)).status_code in (409, 413)


def test_metadata_is_refused_like_post_before_any_byte(api: Api, alice: Account):
    response = create(api, alice, sperrfrist="2026-02-30", titel="x" * 256)
    assert response.status_code == 422
    post = api.upload(alice, [("bericht.txt", TEXT)], sperrfrist="2026-02-30", titel="x" * 256)
    assert response.get_json() == post.get_json()
    assert create(api, alice, length=0).get_json()["errors"] == {
        "file": ["The file field must not be an empty file."]
    }
    assert create(api, alice, length=200 * 1024 * 1024 + 1).status_code == 413
    assert uploads(api) == 0 and api.objects() == set()


def test_an_expired_upload_is_gone(api: Api, alice: Account):
    url = create(api, alice).headers["Location"]
    with api.app.app_context():
        upload = db.session.scalars(select(ResumableUpload)).one()
        upload.expires_at = upload.created_at.replace(year=2000)
        db.session.commit()
    assert api.client.head(url, headers={**TUS, **alice.auth}).status_code == 410
    assert patch(api, alice, url, TEXT).status_code == 410


@pytest.mark.parametrize("fail_at", ["record", "sample"])
def test_a_failure_while_completing_leaves_nothing(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch, fail_at: str
):
    url = create(api, alice).headers["Location"]
    assert patch(api, alice, url, TEXT[:1000]).status_code == 204

    def database_gone(*args, **kwargs):
        raise OperationalError("INSERT", {}, Exception("connection refused"))

    if fail_at == "record":
        monkeypatch.setattr(files, "create_records", database_gone)
    else:
        monkeypatch.setattr("app.tus.services._sample", database_gone)
    response = patch(api, alice, url, TEXT[1000:], offset=1000)
    assert response.status_code == 503
    assert api.rows() == [] and uploads(api) == 0
    assert api.objects() == set()  # neither the object nor any piece
    assert api.client.head(url, headers={**TUS, **alice.auth}).status_code == 404


def test_termination(api: Api, alice: Account):
    url = create(api, alice).headers["Location"]
    assert patch(api, alice, url, TEXT[:100]).status_code == 204
    assert api.objects() != set() or api.app.config["STORAGE_BACKEND"] == "s3"
    response = api.client.delete(url, headers={**TUS, **alice.auth})
    assert response.status_code == 204
    assert uploads(api) == 0 and api.objects() == set()
    assert api.client.delete(url, headers={**TUS, **alice.auth}).status_code == 404


def test_creating_uploads_is_rate_limited_per_user_and_pieces_are_not(
    api: Api, alice: Account, bob: Account, stack_config: dict
):
    app = create_app({**stack_config, "RATELIMIT_ENABLED": True, "RATELIMIT_UPLOADS": "2/minute"})
    limited = Api(app, app.test_client())
    first, second = create(limited, alice), create(limited, alice)
    assert [first.status_code, second.status_code] == [201, 201]
    refused = create(limited, alice)
    assert refused.status_code == 429 and "Retry-After" in refused.headers
    assert create(limited, bob).status_code == 201
    url = first.headers["Location"]
    for offset in range(0, len(TEXT), len(TEXT) // 4):
        piece = TEXT[offset : offset + len(TEXT) // 4]
        assert patch(limited, alice, url, piece, offset=offset).status_code == 204
    with app.app_context():
        db.engine.dispose()


@pytest.mark.parametrize("kernel_copy", [True, False], ids=["copy_file_range", "read-write"])
def test_a_spooled_body_is_copied_and_hashed_whole_or_not_at_all(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch, kernel_copy: bool
):
    """The local backend copies a spooled body into the append file (in the kernel where it
    can, else through a buffer) and hashes it from the spool: every rule still holds."""
    from app.tus import copying

    calls = []
    real = copying._copy_file_range

    def copy_file_range(*args):
        calls.append(args)
        if not kernel_copy:
            raise OSError(errno.EXDEV, "cross-device")
        return real(*args)

    monkeypatch.setattr(copying, "_copy_file_range", copy_file_range)
    url = create(api, alice).headers["Location"]
    half = len(TEXT) // 2
    wrong = spooled(api, alice, url, TEXT[:half], **_checksum("sha1", b"other"))
    assert wrong.status_code == 460
    assert spooled(api, alice, url, TEXT + b"more").status_code == 413
    state = api.client.head(url, headers={**TUS, **alice.auth})
    assert state.headers["Upload-Offset"] == "0"
    first = spooled(api, alice, url, TEXT[:half], **_checksum("sha256", TEXT[:half]))
    assert first.status_code == 204 and first.headers["Upload-Offset"] == str(half)
    done = spooled(api, alice, url, TEXT[half:], offset=half, **_checksum("sha1", TEXT[half:]))
    assert done.status_code == 204, done.get_json()
    record_id = done.headers["Upload-Record-Id"]
    assert api.get(f"/api/files/{record_id}/download", alice).data == TEXT
    assert api.row(record_id).checksum_sha256 == hashlib.sha256(TEXT).hexdigest()
    # The 413 is refused from the spool's size, before any copy.
    local = api.app.config["STORAGE_BACKEND"] == "local"
    assert len(calls) == (3 if local else 0)


def test_the_sha256_is_read_back_when_this_process_missed_a_piece(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    """Another replica took a piece, or the process restarted: completion hashes the stored
    object instead of the running digest."""
    from app.tus import hashing

    url = create(api, alice).headers["Location"]
    assert spooled(api, alice, url, TEXT[:1000]).status_code == 204
    monkeypatch.setattr(hashing, "digests", hashing.Digests())
    done = spooled(api, alice, url, TEXT[1000:], offset=1000)
    assert done.status_code == 204
    assert api.row(done.headers["Upload-Record-Id"]).checksum_sha256 == (
        hashlib.sha256(TEXT).hexdigest()
    )
