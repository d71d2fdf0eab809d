"""Authenticated downloads: bytes, headers, ranges, conditional requests and availability."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import os
import uuid
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

import pytest

from app import create_app
from app.access_log import JSONFormatter
from app.extensions import db
from app.files import downloads
from app.files.downloads import content_disposition
from app.models import FileRecord
from tests.support import samples
from tests.support.api import Account, Api


def download(api: Api, record_id: str, account: Account | None, **headers):
    return api.get(f"/api/files/{record_id}/download", account, headers=headers)


def test_download_returns_the_exact_bytes_and_headers(api: Api, alice: Account):
    data = samples.csv_bytes()
    record = api.create(alice, 'Übersicht "2025"; final.csv', data)

    response = download(api, record["id"], alice)
    assert response.status_code == 200
    assert response.data == data
    assert response.headers["Content-Type"] == "text/csv"
    assert response.headers["Content-Length"] == str(len(data))
    assert response.headers["Content-Disposition"] == (
        'attachment; filename="Ubersicht _2025__ final.csv"; '
        "filename*=UTF-8''%C3%9Cbersicht%20%222025%22%3B%20final.csv"
    )
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Accept-Ranges"] == "bytes"
    assert response.headers["Cache-Control"] == "private, no-store"
    assert response.headers["ETag"] == f'"{hashlib.sha256(data).hexdigest()}"'
    digest = base64.b64encode(hashlib.sha256(data).digest()).decode()
    assert response.headers["Repr-Digest"] == f"sha-256=:{digest}:"


@pytest.mark.parametrize(
    "name",
    ["a\r\nSet-Cookie: x=1.txt", 'q"uote;semi.txt', "tab\there.txt", "日本語.pdf", "%41.txt"],
)
def test_content_disposition_is_safe_for_any_name(name: str):
    header = content_disposition(name)
    assert not any(ch in header for ch in "\r\n\t\x00")
    ascii_part, _, encoded = header.partition("; filename*=UTF-8''")
    fallback = ascii_part.removeprefix('attachment; filename="').removesuffix('"')
    assert '"' not in fallback and ";" not in fallback and fallback.isascii()
    assert unquote(encoded) == name
    assert all(ch.isalnum() or ch in "%!#$&+-.^_`|~" for ch in encoded)


def test_large_download_streams_the_same_bytes(api: Api, alice: Account):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("blob.bin", os.urandom(3 * 1024 * 1024 + 17))
    zipped = buffer.getvalue()
    record = api.create(alice, "archive.zip", zipped)
    response = download(api, record["id"], alice)
    assert response.status_code == 200
    assert response.is_streamed
    assert hashlib.sha256(response.data).digest() == hashlib.sha256(zipped).digest()


@pytest.mark.parametrize(
    "header,status,part",
    [
        ("bytes=0-9", 206, slice(0, 10)),
        ("bytes=10-", 206, slice(10, None)),
        ("bytes=-5", 206, slice(-5, None)),
        ("bytes=5-100000000", 206, slice(5, None)),
        # A suffix longer than the file is the whole file (RFC 9110 14.1.2), not a 416.
        ("bytes=-100000000", 206, slice(0, None)),
    ],
)
def test_single_ranges(api: Api, alice: Account, header: str, status: int, part: slice):
    data = samples.pdf_bytes()
    record = api.create(alice, data=data)
    response = download(api, record["id"], alice, Range=header)
    assert response.status_code == status
    assert response.data == data[part]
    start = part.start if part.start is None or part.start >= 0 else len(data) + part.start
    start = start or 0
    end = start + len(data[part]) - 1
    assert response.headers["Content-Range"] == f"bytes {start}-{end}/{len(data)}"
    assert response.headers["Content-Length"] == str(len(data[part]))


def test_unsatisfiable_range_is_416(api: Api, alice: Account):
    data = samples.pdf_bytes()
    record = api.create(alice, data=data)
    response = download(api, record["id"], alice, Range=f"bytes={len(data)}-")
    assert response.status_code == 416
    assert response.headers["Content-Range"] == f"bytes */{len(data)}"
    assert response.get_json() == {"message": "The requested range is not satisfiable."}


def test_ranges_in_other_units_get_the_whole_file(api: Api, alice: Account):
    data = samples.pdf_bytes()
    record = api.create(alice, data=data)
    response = download(api, record["id"], alice, Range="items=0-3")
    assert response.status_code == 200 and response.data == data
    assert "Content-Range" not in response.headers


def test_multiple_ranges_get_the_whole_file(api: Api, alice: Account):
    data = samples.pdf_bytes()
    record = api.create(alice, data=data)
    response = download(api, record["id"], alice, Range="bytes=0-1,5-6")
    assert response.status_code == 200 and response.data == data


def test_if_none_match_with_the_current_etag_is_304(api: Api, alice: Account):
    record = api.create(alice)
    etag = download(api, record["id"], alice).headers["ETag"]
    response = download(api, record["id"], alice, **{"If-None-Match": etag})
    assert response.status_code == 304
    assert response.data == b""
    assert response.headers["ETag"] == etag
    other = download(api, record["id"], alice, **{"If-None-Match": '"other"'})
    assert other.status_code == 200


def test_if_range_with_a_stale_etag_gets_the_whole_file(api: Api, alice: Account):
    data = samples.pdf_bytes()
    record = api.create(alice, data=data)
    response = download(api, record["id"], alice, Range="bytes=0-3", **{"If-Range": '"old"'})
    assert response.status_code == 200 and response.data == data
    etag = response.headers["ETag"]
    response = download(api, record["id"], alice, Range="bytes=0-3", **{"If-Range": etag})
    assert response.status_code == 206 and response.data == data[:4]


def test_text_types_get_no_charset(api: Api, alice: Account):
    record = api.create(alice, "notes.txt", "Grüße\n".encode())
    assert download(api, record["id"], alice).headers["Content-Type"] == "text/plain"


def test_unreleased_file_is_403_for_its_owner_and_fine_for_admin(
    api: Api, alice: Account, admin: Account
):
    record = api.create(alice, freigabe="false")
    blocked = download(api, record["id"], alice)
    assert blocked.status_code == 403
    assert blocked.get_json() == {"message": "This file is not released for download."}
    assert download(api, record["id"], admin).status_code == 200


@pytest.mark.parametrize("races", [1, downloads.MAX_REREADS])
def test_a_download_that_loses_races_with_replaces_gets_the_newest_content(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch, races: int
):
    """The record is read, then replaced (its old object removed) before the object is
    opened, `races` times in a row: the download follows it to the newest content."""
    record = api.create(alice, "v0.txt", b"version 0\n")
    storage_class = type(api.app.extensions["storage"])
    real_open = storage_class.open
    replaced: list[int] = []

    def open_after_a_replace(self, key, *args, **kwargs):
        if len(replaced) < races:
            replaced.append(len(replaced) + 1)
            content = f"version {len(replaced)}\n".encode()
            answer = api.replace(alice, record["id"], f"v{len(replaced)}.txt", content)
            assert answer.status_code == 200
        return real_open(self, key, *args, **kwargs)

    monkeypatch.setattr(storage_class, "open", open_after_a_replace)
    response = download(api, record["id"], alice)
    assert response.status_code == 200
    assert response.data == f"version {races}\n".encode()
    assert response.headers["Content-Disposition"].startswith(
        f'attachment; filename="v{races}.txt"'
    )
    assert response.headers["Cache-Control"] == "private, no-store"
    assert response.headers["ETag"] == f'"{hashlib.sha256(response.data).hexdigest()}"'


def test_an_administrators_download_of_an_unreleased_record_follows_a_replace(
    api: Api, alice: Account, admin: Account, monkeypatch: pytest.MonkeyPatch
):
    """The record read again after a lost race is read for the same caller: an administrator
    still gets alice's unreleased record, which the public could not."""
    record = api.create(alice, "v0.txt", b"version 0\n", freigabe="false")
    storage_class = type(api.app.extensions["storage"])
    real_open = storage_class.open
    replaced: list[bool] = []

    def open_after_a_replace(self, key, *args, **kwargs):
        if not replaced:
            replaced.append(True)
            answer = api.replace(alice, record["id"], "v1.txt", b"version 1\n")
            assert answer.status_code == 200
        return real_open(self, key, *args, **kwargs)

    monkeypatch.setattr(storage_class, "open", open_after_a_replace)
    response = download(api, record["id"], admin)
    assert response.status_code == 200
    assert response.data == b"version 1\n"


def test_embargo_blocks_until_the_day_itself(api: Api, alice: Account, admin: Account):
    today = datetime.now(UTC).date()
    future = api.create(alice, sperrfrist=(today + timedelta(days=1)).isoformat())
    on_the_day = api.create(alice, sperrfrist=today.isoformat())
    past = api.create(alice, sperrfrist="2000-01-01")

    response = download(api, future["id"], alice)
    assert response.status_code == 403
    assert (today + timedelta(days=1)).isoformat() in response.get_json()["message"]
    assert download(api, future["id"], admin).status_code == 200
    assert download(api, on_the_day["id"], alice).status_code == 200
    assert download(api, past["id"], alice).status_code == 200


def test_embargo_day_follows_the_configured_time_zone(api: Api, alice: Account, stack_config: dict):
    # Somewhere it is already tomorrow: Kiritimati is UTC+14, Niue UTC-11.
    ahead, behind = "Pacific/Kiritimati", "Pacific/Niue"
    tomorrow_ahead = (datetime.now(UTC) + timedelta(hours=14)).date()
    record = api.create(alice, sperrfrist=tomorrow_ahead.isoformat())
    for zone, expected in ((ahead, 200), (behind, 403)):
        app = create_app({**stack_config, "APP_TIMEZONE": zone})
        response = app.test_client().get(f"/api/files/{record['id']}/download", headers=alice.auth)
        assert response.status_code == expected, zone
        with app.app_context():
            db.engine.dispose()


def test_download_needs_a_token(api: Api, alice: Account):
    record = api.create(alice)
    assert download(api, record["id"], None).status_code == 401


# --- DOWNLOAD_OFFLOAD=nginx (tests/test_reverse_proxy.py runs it behind nginx) -------------


@pytest.fixture
def offloading(stack_config: dict) -> Iterator[Any]:
    """A second app on the same database and storage, with the proxy sending the bytes."""
    app = create_app(
        {**stack_config, "DOWNLOAD_OFFLOAD": "nginx", "DOWNLOAD_OFFLOAD_PREFIX": "/internal/"}
    )
    yield app
    with app.app_context():
        db.engine.dispose()


def stored_path_of(app: Any, record_id: str) -> str:
    with app.app_context():
        return db.session.get(FileRecord, uuid.UUID(record_id)).stored_path


@pytest.mark.parametrize("door", ["/api/files/{}/download", "/api/public/files/{}/download"])
@pytest.mark.parametrize("extra", [{}, {"Range": "bytes=2-5"}, {"Range": "bytes=-1000000"}])
def test_offload_answers_with_the_headers_and_a_redirect_instead_of_the_body(
    api: Api, alice: Account, offloading: Any, stack_config: dict, door: str, extra: dict
):
    data = samples.pdf_bytes()
    record = api.create(alice, "Prüfbericht.pdf", data)
    response = offloading.test_client().get(
        door.format(record["id"]), headers={**alice.auth, **extra}
    )
    assert response.status_code == 200 and response.data == b""
    key = stored_path_of(offloading, record["id"])
    if stack_config["STORAGE_BACKEND"] == "local":
        assert response.headers["X-Accel-Redirect"] == f"/internal/{key}"
    else:
        location, _, query = response.headers["X-Accel-Redirect"].partition("?")
        assert location == f"/internal/{stack_config['S3_BUCKET']}/{key}"
        assert "X-Amz-Signature=" in query
    assert response.headers["Content-Type"] == "application/pdf"
    assert response.headers["ETag"] == f'"{hashlib.sha256(data).hexdigest()}"'
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Offload-Content-Disposition"] == content_disposition(
        "Prüfbericht.pdf"
    )
    public = door.startswith("/api/public")
    assert response.headers["Cache-Control"] == (
        "public, max-age=0, must-revalidate" if public else "private, no-store"
    )
    # The proxy answers the range and says it takes ranges; it adds the disposition back.
    for name in ("Content-Disposition", "Content-Range", "Accept-Ranges"):
        assert name not in response.headers


@pytest.mark.parametrize(
    "headers,status,part",
    [
        ({"Range": "bytes=0-1,5-6"}, 200, slice(None)),
        ({"Range": "items=0-3"}, 200, slice(None)),
        ({"Range": "bytes=x-y"}, 200, slice(None)),
        ({"Range": "bytes=0-3", "If-Range": '"old"'}, 200, slice(None)),
        ({"Range": "bytes=0-3", "If-Range": "{etag}"}, 206, slice(0, 4)),
    ],
)
def test_offload_streams_what_the_proxy_would_answer_otherwise(
    api: Api, alice: Account, offloading: Any, headers: dict, status: int, part: slice
):
    data = samples.pdf_bytes()
    record = api.create(alice, data=data)
    etag = f'"{hashlib.sha256(data).hexdigest()}"'
    headers = {name: value.format(etag=etag) for name, value in headers.items()}
    response = offloading.test_client().get(
        f"/api/files/{record['id']}/download", headers={**alice.auth, **headers}
    )
    assert (response.status_code, response.data) == (status, data[part])
    assert "X-Accel-Redirect" not in response.headers


def test_offload_leaves_304_416_and_refusals_to_the_service(
    api: Api, alice: Account, offloading: Any
):
    data = samples.pdf_bytes()
    record = api.create(alice, data=data)
    unreleased = api.create(alice, data=data, freigabe="false")
    embargoed = api.create(alice, data=data, sperrfrist="2999-01-01")
    client = offloading.test_client()
    path = f"/api/files/{record['id']}/download"
    etag = f'"{hashlib.sha256(data).hexdigest()}"'
    answers = [
        (client.get(path, headers={**alice.auth, "If-None-Match": etag}), 304),
        (client.get(path, headers={**alice.auth, "Range": f"bytes={len(data)}-"}), 416),
        (client.get(f"/api/files/{unreleased['id']}/download", headers=alice.auth), 403),
        (client.get(f"/api/public/files/{unreleased['id']}/download"), 404),
        (client.get(f"/api/files/{embargoed['id']}/download", headers=alice.auth), 403),
        (client.get(f"/api/public/files/{embargoed['id']}/download"), 403),
    ]
    for response, status in answers:
        assert response.status_code == status
        assert "X-Accel-Redirect" not in response.headers
        assert data[:100] not in response.data
    assert answers[1][0].headers["Content-Range"] == f"bytes */{len(data)}"


@pytest.mark.parametrize(
    ("extra", "status"),
    [({}, 200), ({"Range": "bytes=2-5"}, 206), ({"Range": "bytes=-1000000"}, 206)],
)
def test_an_offloaded_download_is_logged_with_the_status_the_proxy_answers(
    api: Api,
    alice: Account,
    offloading: Any,
    caplog: pytest.LogCaptureFixture,
    extra: dict,
    status: int,
):
    """The service answers 200 with the redirect; the client gets the proxy's 206 for a
    range, and the access line says what the client got (its bytes are the proxy's)."""
    record = api.create(alice, "a.pdf", samples.pdf_bytes())
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="app.access"):
        response = offloading.test_client().get(
            f"/api/files/{record['id']}/download", headers={**alice.auth, **extra}, buffered=True
        )
    assert response.status_code == 200 and "X-Accel-Redirect" in response.headers
    formatter = JSONFormatter()
    (line,) = [json.loads(formatter.format(r)) for r in caplog.records if r.name == "app.access"]
    assert (line["status"], line["bytes"], line["offloaded"]) == (status, 0, True)
