"""A download in flight ends when the right to it does (docs/security.md, "Downloads in
flight"), seen through the test client: the body is read chunk by chunk, the right withdrawn
in between, and the recheck interval made zero so the next chunk asks again. The real-server
version of these tests is tests/tus/test_downloads_in_flight.py."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app import streaming
from app.files import downloads
from tests.support.api import Account, Api

MiB = 1024 * 1024
#: Several chunks of streaming.READ_BYTES (or of the S3 stream's own size).
CONTENT = (b"Zeile mit etwas Text, 0123456789.\n" * (MiB // 8))[:MiB]


@pytest.fixture
def alice(api: Api) -> Account:
    return api.account("alice@example.org")


@pytest.fixture(autouse=True)
def recheck_every_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(downloads, "RECHECK_SECONDS", 0.0)


def released(api: Api, alice: Account) -> str:
    return api.create(alice, "gross.txt", CONTENT, freigabe="true")["id"]


def share(api: Api, alice: Account, record_id: str) -> tuple[str, str]:
    expires = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    created = api.client.post(
        f"/api/files/{record_id}/links", json={"expires_at": expires}, headers=alice.auth
    )
    assert created.status_code == 201, created.get_json()
    link = created.get_json()
    return link["id"], link["url"].rsplit("/s/", 1)[1]


def read_in_pieces(
    app: Flask, path: str, headers: dict[str, str], withdraw: Callable[[], None]
) -> tuple[Any, bytes, bytes, type[BaseException] | None]:
    """GET `path`, read its first chunk, `withdraw()`, then read on: (response, the first
    chunk, the bytes received after the withdrawal, the exception that ended the body or
    None)."""
    response = FlaskClient(app).get(path, headers=headers, buffered=False)
    assert response.status_code == 200
    chunks = iter(response.response)
    first = next(chunks)
    withdraw()
    rest = b""
    ended_by = None
    try:
        for chunk in chunks:
            rest += chunk
    except streaming.Withdrawn as exc:
        ended_by = type(exc)
    finally:
        response.close()
    return response, first, rest, ended_by


@pytest.mark.parametrize("case", ["link revoked", "token revoked", "record unreleased"])
def test_a_download_ends_short_once_its_right_is_withdrawn(
    app: Flask, api: Api, alice: Account, case: str
):
    record_id = released(api, alice)
    if case == "link revoked":
        link_id, secret = share(api, alice, record_id)
        path, headers = f"/api/shared/{secret}/files/{record_id}/download", {}
    elif case == "token revoked":
        path, headers = f"/api/files/{record_id}/download", alice.auth
    else:
        path, headers = f"/api/public/files/{record_id}/download", {}

    def withdraw() -> None:
        if case == "link revoked":
            answer = api.client.delete(f"/api/links/{link_id}", headers=alice.auth)
            assert answer.status_code == 204
        elif case == "token revoked":
            answer = api.client.delete("/api/tokens/current", headers=alice.auth)
            assert answer.status_code == 204
        else:
            answer = api.patch(record_id, alice, {"freigabe": False})
            assert answer.status_code == 200, answer.get_json()

    response, first, rest, ended_by = read_in_pieces(app, path, headers, withdraw)
    assert response.content_length == len(CONTENT)
    assert ended_by is streaming.Withdrawn
    # Not one byte after the withdrawal: the body ends short.
    assert (rest, CONTENT.startswith(first), len(first) < len(CONTENT)) == (b"", True, True)


@pytest.mark.parametrize("door", ["link", "account", "public"])
def test_a_download_nobody_withdraws_arrives_whole(app: Flask, api: Api, alice: Account, door: str):
    """Asked at every chunk, a right that stands lets every byte through."""
    record_id = released(api, alice)
    if door == "link":
        _, secret = share(api, alice, record_id)
        path, headers = f"/api/shared/{secret}/files/{record_id}/download", {}
    elif door == "account":
        path, headers = f"/api/files/{record_id}/download", alice.auth
    else:
        path, headers = f"/api/public/files/{record_id}/download", {}
    response, first, rest, ended_by = read_in_pieces(app, path, headers, lambda: None)
    assert ended_by is None
    assert first + rest == CONTENT


@pytest.mark.parametrize("races", [1, downloads.MAX_REREADS])
def test_a_download_that_followed_replaces_still_ends_once_its_right_is_withdrawn(
    app: Flask, api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch, races: int
):
    """The record is replaced before its object is opened, `races` times in a row: the
    download follows it to the newest content, and is rechecked all the same."""
    record_id = released(api, alice)
    storage_class = type(app.extensions["storage"])
    real_open = storage_class.open
    replaced: list[bytes] = []

    def open_after_a_replace(self, key, *args, **kwargs):
        if len(replaced) < races:
            content = f"Version {len(replaced) + 1}\n".encode() + CONTENT
            replaced.append(content)
            answer = api.replace(alice, record_id, "gross.txt", content)
            assert answer.status_code == 200, answer.get_json()
        return real_open(self, key, *args, **kwargs)

    monkeypatch.setattr(storage_class, "open", open_after_a_replace)

    def withdraw() -> None:
        assert api.client.delete("/api/tokens/current", headers=alice.auth).status_code == 204

    path = f"/api/files/{record_id}/download"
    response, first, rest, ended_by = read_in_pieces(app, path, alice.auth, withdraw)
    newest = replaced[-1]
    assert len(replaced) == races
    assert response.content_length == len(newest)
    assert ended_by is streaming.Withdrawn
    assert (rest, newest.startswith(first), len(first) < len(newest)) == (b"", True, True)
