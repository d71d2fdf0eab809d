"""Malformed and hostile requests get clear 4xx answers and change nothing."""

from __future__ import annotations

import tracemalloc

import pytest

from app import create_app
from app.extensions import db
from app.storage import StorageUnavailable
from tests.support import samples
from tests.support.api import Account, Api, encode_multipart

BOUNDARY = "b0undary"
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"


def post_raw(api: Api, account: Account, body: bytes, content_type: str = MULTIPART):
    return api.client.post(
        "/api/files", data=body, headers={**account.auth, "Content-Type": content_type}
    )


def part(headers: str, data: bytes) -> bytes:
    return f"--{BOUNDARY}\r\n{headers}\r\n\r\n".encode() + data + b"\r\n"


CLOSE = f"--{BOUNDARY}--\r\n".encode()
GOOD_PART = part('Content-Disposition: form-data; name="files[]"; filename="a.txt"', b"hello\n")


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"no boundary at all " * 10_000, id="no-boundary"),
        pytest.param(GOOD_PART[:-10], id="cut-short"),
        pytest.param(
            GOOD_PART + part("Content-Type: text/plain", b"x") + CLOSE, id="no-content-disposition"
        ),
        pytest.param(
            f"--{BOUNDARY}\r\n".encode()
            + b'Content-Disposition: form-data; name="files[]"; filename="b\xe9.txt"\r\n\r\nx\r\n'
            + CLOSE,
            id="latin1-header",
        ),
        pytest.param(
            f"--{BOUNDARY}\r\nContent-Disposition: form-data; ".encode() + b"x" * 300_000,
            id="endless-header",
        ),
    ],
)
def test_malformed_multipart_is_400_and_stores_nothing(api: Api, alice: Account, body: bytes):
    response = post_raw(api, alice, body)
    assert response.status_code == 400
    assert response.get_json() == {
        "message": "The multipart/form-data body is malformed or incomplete."
    }
    assert api.rows() == [] and api.objects() == set()


def test_a_body_without_boundaries_is_not_buffered(api: Api, alice: Account):
    body = b"\x00" * (16 * 1024 * 1024)
    tracemalloc.start()
    try:
        response = post_raw(api, alice, body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 400
    # The request body itself (16 MiB, held by the test client) is not traced twice.
    assert peak < 20 * 1024 * 1024, peak


def test_whatever_follows_the_closing_boundary_is_ignored(api: Api, alice: Account):
    response = post_raw(api, alice, GOOD_PART + CLOSE + b"trailing junk " * 1000)
    assert response.status_code == 201
    assert len(api.rows()) == 1


def test_a_file_part_without_a_name_is_ignored(api: Api, alice: Account):
    nameless = part('Content-Disposition: form-data; filename="a.txt"', b"hello\n")
    response = post_raw(api, alice, nameless + CLOSE)
    assert response.status_code == 422
    assert list(response.get_json()["errors"]) == ["files"]
    response = post_raw(api, alice, nameless + GOOD_PART + CLOSE)
    assert response.status_code == 201
    assert len(response.get_json()["files"]) == 1


def test_a_repeated_form_field_keeps_its_last_value(api: Api, alice: Account):
    body = (
        GOOD_PART
        + part('Content-Disposition: form-data; name="titel"', b"erster")
        + part('Content-Disposition: form-data; name="titel"', b"zweiter")
        + CLOSE
    )
    response = post_raw(api, alice, body)
    assert response.status_code == 201
    assert response.get_json()["files"][0]["titel"] == "zweiter"


def test_form_fields_must_be_utf8(api: Api, alice: Account):
    body = GOOD_PART + part('Content-Disposition: form-data; name="titel"', b"Gr\xfc\xdfe") + CLOSE
    response = post_raw(api, alice, body)
    assert response.status_code == 422
    assert response.get_json()["errors"] == {"titel": ["The titel field must be UTF-8 text."]}
    assert api.rows() == [] and api.objects() == set()


def test_nul_characters_and_lone_surrogates_are_422(api: Api, alice: Account):
    record = api.create(alice)
    for value in ("a\x00b", "\ud800"):
        response = api.patch(record["id"], alice, {"titel": value})
        assert response.status_code == 422, value
        assert list(response.get_json()["errors"]) == ["titel"]
    upload = api.upload(alice, [("a.txt", b"hi\n")], autoren="x\x00y")
    assert upload.status_code == 422
    for path in ("/api/files", "/api/public/files"):
        listed = api.client.get(path, query_string={"aktiv_id": "a\x00"}, headers=alice.auth)
        assert listed.status_code == 422
        assert list(listed.get_json()["errors"]) == ["aktiv_id"]
    login = api.client.post(
        "/api/tokens",
        data='{"email": "\\ud800@example.org", "password": "\\u0000", "token_name": "x"}',
        headers={"Content-Type": "application/json"},
    )
    assert login.status_code == 422
    assert set(login.get_json()["errors"]) == {"email", "password"}


@pytest.mark.parametrize("params", [{"page": "١"}, {"page": "²"}, {"since": "٢٠٢٦-01-01"}])
def test_only_ascii_digits_count(api: Api, alice: Account, params: dict):
    response = api.get("/api/files", alice, query_string=params)
    assert response.status_code == 422


def test_fullwidth_digits_are_not_an_integer(api: Api, alice: Account):
    record = api.create(alice)
    response = api.patch(record["id"], alice, {"reihenfolge": "１２"})
    assert response.status_code == 422


def test_other_range_units_and_weak_if_range_get_the_whole_file(api: Api, alice: Account):
    data = samples.pdf_bytes()
    record = api.create(alice, data=data)
    url = f"/api/files/{record['id']}/download"
    etag = api.get(url, alice).headers["ETag"]
    for headers in ({"Range": "items=0-1"}, {"Range": "bytes=0-1", "If-Range": f"W/{etag}"}):
        response = api.get(url, alice, headers=headers)
        assert response.status_code == 200, headers
        assert response.data == data


@pytest.mark.parametrize(
    "method,path",
    [("get", "/api/files/not-a-uuid"), ("put", "/api/files"), ("get", "/api/files/x/y/z")],
)
def test_anonymous_callers_get_401_on_every_protected_path(api: Api, method: str, path: str):
    response = getattr(api.client, method)(path)
    assert response.status_code == 401
    assert response.get_json() == {"message": "Unauthenticated."}


def test_cleanup_of_a_failed_upload_is_best_effort(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    storage = api.app.extensions["storage"]
    real_delete = storage.delete
    calls = []

    def flaky_delete(key: str) -> None:
        calls.append(key)
        if len(calls) == 1:
            raise StorageUnavailable("blip")
        real_delete(key)

    monkeypatch.setattr(storage, "delete", flaky_delete)
    files = [("a.txt", b"one\n"), ("b.txt", b"two\n"), ("c.html", samples.html_bytes())]
    response = api.upload(alice, files)
    assert response.status_code == 422
    assert len(calls) == 2
    monkeypatch.undo()
    assert api.objects() == {calls[0]}  # only the one whose deletion failed is left


def test_behind_a_proxy_the_forwarded_client_and_host_count(
    api: Api, alice: Account, stack_config: dict
):
    app = create_app(
        {
            **stack_config,
            "PROXY_COUNT": 1,
            "RATELIMIT_ENABLED": True,
            "RATELIMIT_TOKENS": "1/minute",
        }
    )
    client = app.test_client()
    body = {"email": alice.email, "password": "wrong", "token_name": "x"}

    def login(address: str):
        return client.post("/api/tokens", json=body, headers={"X-Forwarded-For": address})

    assert login("203.0.113.1").status_code == 422
    assert login("203.0.113.1").status_code == 429
    assert login("203.0.113.2").status_code == 422
    listed = client.get(
        "/api/public/files",
        headers={"X-Forwarded-Proto": "https", "X-Forwarded-Host": "files.example.org"},
    )
    assert listed.get_json()["path"] == "https://files.example.org/api/public/files"
    with app.app_context():
        db.engine.dispose()


def test_multipart_helper_escapes_like_curl():
    content_type, body = encode_multipart([("files[]", 'a"b\\c.txt', b"x", "text/plain")])
    assert b'filename="a\\"b\\\\c.txt"' in body
    assert content_type.startswith("multipart/form-data; boundary=")
