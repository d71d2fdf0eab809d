"""The tus endpoints through the test client, every answer checked against the OpenAPI
document: the protocol's refusals, and failures while an upload completes."""

from __future__ import annotations

import base64
import errno
import hashlib
import io
import json
import tempfile
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from app import create_app
from app.extensions import db
from app.files import writes as files
from app.models import ResumableUpload
from tests.support.api import Account, Api
from tests.support.openapi_client import OpenAPIValidatingClient

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


# --- issue 20 item 6, issue 21 items 4, 6 and 7 ------------------------------------------


def test_answers_without_a_body_carry_no_type(api: Api, alice: Account):
    """Every tus answer without a body (discovery, creation, HEAD, PATCH, termination) has no
    Content-Type, as 204s elsewhere, instead of Flask's text/html."""
    discovery = api.client.options("/api/uploads")
    created = create(api, alice)
    url = created.headers["Location"]
    state = api.client.head(url, headers={**TUS, **alice.auth})
    piece = patch(api, alice, url, TEXT[:100])
    last = patch(api, alice, url, TEXT[100:], offset=100)
    late_head = api.client.head(url, headers={**TUS, **alice.auth})
    other = create(api, alice).headers["Location"]
    terminated = api.client.delete(other, headers={**TUS, **alice.auth})
    answers = {
        "OPTIONS": discovery,
        "POST": created,
        "HEAD": state,
        "PATCH": piece,
        "last PATCH": last,
        "late HEAD": late_head,
        "DELETE": terminated,
    }
    assert {name: r.status_code for name, r in answers.items()} == {
        "OPTIONS": 204,
        "POST": 201,
        "HEAD": 200,
        "PATCH": 204,
        "last PATCH": 204,
        "late HEAD": 200,
        "DELETE": 204,
    }
    assert {name: r.headers.get("Content-Type") for name, r in answers.items()} == dict.fromkeys(
        answers
    )
    assert all(r.data == b"" for r in answers.values())


@pytest.mark.parametrize("value", ["²", "1²", "¹", "³2", "١٢", "１２", " 12", "12 ", "+12", "-0"])
def test_byte_counts_are_ascii_digits_or_400(api: Api, alice: Account, value: str):
    """`²` passes `str.isdigit()` but not `int()` (was a 500); other scripts' digits pass
    both (were taken as numbers). tus byte counts are ASCII digits."""
    created = api.client.post(
        "/api/uploads",
        headers={**TUS, **alice.auth, "Upload-Length": value, "Upload-Metadata": ""},
    )
    assert created.status_code == 400, created.data
    assert created.get_json() == {"message": "Upload-Length must be a whole number of bytes."}
    url = create(api, alice).headers["Location"]
    response = api.client.patch(
        url,
        data=TEXT[:10],
        headers={**TUS, **alice.auth, "Upload-Offset": value},
        content_type=OFFSET_TYPE,
    )
    assert response.status_code == 400
    assert response.get_json() == {"message": "Upload-Offset must be a whole number of bytes."}
    assert uploads(api) == 1
    assert api.client.head(url, headers={**TUS, **alice.auth}).headers["Upload-Offset"] == "0"


class WatchedBody(io.BytesIO):
    """A request body that records whether anyone read it."""

    read_bytes = 0

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        self.read_bytes += len(chunk)
        return chunk

    def readinto(self, buffer) -> int:  # type: ignore[override]
        count = super().readinto(buffer)
        self.read_bytes += count
        return count

    def readline(self, size: int | None = -1) -> bytes:
        line = super().readline(size)
        self.read_bytes += len(line)
        return line


def test_a_body_too_long_or_for_no_upload_is_refused_unread(api: Api, alice: Account):
    """The lookup and the announced length are checked before a byte of the body is read."""
    url = create(api, alice).headers["Location"]
    for target, body, status in [
        (url, TEXT + b"more", 413),
        ("/api/uploads/00000000-0000-4000-8000-000000000000", TEXT, 404),
    ]:
        watched = WatchedBody(body)
        response = api.client.patch(
            target,
            input_stream=watched,
            content_length=len(body),
            headers={**TUS, **alice.auth, "Upload-Offset": "0"},
            content_type=OFFSET_TYPE,
        )
        assert response.status_code == status
        assert watched.read_bytes == 0, target


@pytest.mark.parametrize("refusal", ["checksum", "too long"])
def test_a_refused_creation_with_upload_leaves_no_upload(api: Api, alice: Account, refusal: str):
    """The client of a failed creation never learns the upload's location: nothing stays."""
    body = TEXT[:100] if refusal == "checksum" else TEXT + b"more"
    headers = _checksum("sha1", b"other") if refusal == "checksum" else {}
    response = api.client.post(
        "/api/uploads",
        data=body,
        headers={
            **TUS,
            **alice.auth,
            "Upload-Length": str(len(TEXT)),
            "Upload-Metadata": f"filename {_b64('bericht.txt')}",
            **headers,
        },
        content_type=OFFSET_TYPE,
    )
    assert response.status_code == (460 if refusal == "checksum" else 413)
    assert "Location" not in response.headers
    assert uploads(api) == 0
    assert {key for key in api.objects() if key.startswith("uploads/")} == set()


def test_unfinished_uploads_per_user_are_limited(stack_config: dict, alice: Account):
    app = create_app({**stack_config, "UPLOAD_MAX_UNFINISHED": 2})
    app.test_client_class = OpenAPIValidatingClient
    limited = Api(app, app.test_client())
    first, second = create(limited, alice), create(limited, alice)
    assert [first.status_code, second.status_code] == [201, 201]
    refused = create(limited, alice)
    assert refused.status_code == 429
    hours = stack_config.get("UPLOAD_EXPIRY_HOURS", 24)
    assert 0 < int(refused.headers["Retry-After"]) <= hours * 3600 + 1
    assert refused.get_json()["message"] == (
        "You have 2 unfinished uploads, the most allowed: finish or terminate (DELETE) one of "
        "them before starting another."
    )
    assert uploads(limited) == 2
    # A finished upload no longer counts, nor does a terminated one.
    assert patch(limited, alice, first.headers["Location"], TEXT).status_code == 204
    assert create(limited, alice).status_code == 201
    assert create(limited, alice).status_code == 429
    terminated = limited.client.delete(second.headers["Location"], headers={**TUS, **alice.auth})
    assert terminated.status_code == 204
    assert create(limited, alice).status_code == 201
    with app.app_context():
        db.engine.dispose()


def _set_claim(api: Api, url: str, until: datetime) -> None:
    with api.app.app_context():
        upload = db.session.get(ResumableUpload, uuid.UUID(url.rsplit("/", 1)[1]))
        upload.claim, upload.claimed_until = uuid.uuid4(), until
        db.session.commit()


def test_a_claimed_upload_is_409_until_its_claim_expires(api: Api, alice: Account):
    """A request writing an upload keeps every other one off it (409, nothing changed), on
    any replica; the claim of a process that died expires."""
    url = create(api, alice).headers["Location"]
    assert patch(api, alice, url, TEXT[:100]).status_code == 204
    _set_claim(api, url, datetime.now(UTC) + timedelta(minutes=1))
    busy = patch(api, alice, url, TEXT[100:], offset=100)
    assert busy.status_code == 409
    assert busy.get_json()["message"].startswith("Another request is writing this upload")
    state = api.client.head(url, headers={**TUS, **alice.auth})
    assert state.status_code == 200 and state.headers["Upload-Offset"] == "100"
    assert api.rows() == []
    _set_claim(api, url, datetime.now(UTC) - timedelta(seconds=1))
    done = patch(api, alice, url, TEXT[100:], offset=100)
    assert done.status_code == 204
    assert api.get(f"/api/files/{done.headers['Upload-Record-Id']}/download", alice).data == TEXT


def test_a_failure_after_the_record_committed_keeps_its_object(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    """The clean-up of a failed completion never removes an object a committed record names
    (before: a second completion's clean-up deleted the first one's object)."""
    real = files.create_records

    def committed_then_lost(*args, **kwargs):
        real(*args, **kwargs)
        raise OperationalError("COMMIT", {}, Exception("connection lost after the commit"))

    monkeypatch.setattr(files, "create_records", committed_then_lost)
    url = create(api, alice).headers["Location"]
    assert patch(api, alice, url, TEXT).status_code == 503
    [record] = api.rows()
    assert api.get(f"/api/files/{record.id}/download", alice).data == TEXT
    state = api.client.head(url, headers={**TUS, **alice.auth})
    assert state.headers["Upload-Record-Id"] == str(record.id)


def test_structured_fields_go_through_tus_as_through_a_form(api: Api, alice: Account):
    """Issue 49: `creators`, `related_identifiers` and `series` as JSON text; a series that is
    not there refused before any byte, as a bad identifier is."""
    creators = json.dumps([{"family_name": "Muster", "given_name": "Erika"}])
    assert create(api, alice, series=json.dumps({"slug": "keine"})).get_json()["errors"] == {
        "series.slug": [
            "There is no series keine; an administrator makes series (POST /api/series)."
        ]
    }
    bad = create(api, alice, creators=json.dumps([{"family_name": "M", "orcid": "1"}]))
    assert list(bad.get_json()["errors"]) == ["creators.0.orcid"]
    assert uploads(api) == 0
    made = create(api, alice, creators=creators)
    assert made.status_code == 201
    assert patch(api, alice, made.headers["Location"], TEXT).status_code == 204
    [record] = api.rows()
    assert (json.loads(record.creators), record.autoren) == (json.loads(creators), "Muster, Erika")
