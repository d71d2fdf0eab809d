"""A download in flight ends when the right to it does (issue 36, finding 11): the real server
streams it from its event loop and asks every few seconds whether the link, the token, the
account and the record still allow it; once not, the connection is closed short."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
import requests

from tests.tus.conftest import Deployment, MiB, text_content

SIZE = 48 * MiB
#: After the revocation the client reads this fast: far slower than the server could send,
#: so that what arrives after it is bounded by the server's checks, not by the transfer.
READ_RATE = 3 * MiB  # bytes a second
#: What may still arrive after the revocation: the check interval (2 s) at that rate, plus
#: the read-ahead and the socket buffers of both sides; the whole rest would be 40 MiB.
AFTER_AT_MOST = 16 * MiB
CONTENT = text_content(SIZE, seed="flight")


def upload(deployment: Deployment, path: str = "") -> str:
    response = requests.post(
        f"{deployment.base}/api/files",
        headers=deployment.auth(),
        files={"files[]": ("gross.txt", CONTENT)},
        data={"path": path} if path else {},
        timeout=120,
    )
    assert response.status_code == 201, response.text
    return response.json()["files"][0]["id"]


def slow_download(
    deployment: Deployment,
    path: str,
    headers: dict[str, str],
    withdraw: Callable[[], None],
    rate: int = READ_RATE,
) -> tuple[int, int, int]:
    """GET `path` with a small receive window, read 4 MiB, call `withdraw()`, then read on at
    `rate` bytes a second until the server ends; (announced length, bytes before, after)."""
    with socket.socket() as client:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        client.settimeout(60)
        client.connect(("127.0.0.1", deployment.port))
        head_lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{head_lines}Connection: close\r\n"
        client.sendall(request.encode() + b"\r\n")
        received = b""
        while b"\r\n\r\n" not in received:
            received += client.recv(65536)
        head, body = received.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200 "), head
        length = int(
            next(
                line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
            ).split(b":")[1]
        )
        before = len(body)
        while before < 4 * MiB:
            before += len(client.recv(65536))
        withdraw()
        after = 0
        started = time.monotonic()
        while chunk := client.recv(256 * 1024):
            after += len(chunk)
            # Read at READ_RATE: sleep until the time these bytes are due.
            delay = started + after / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    return length, before, after


def create_link(deployment: Deployment, record_id: str) -> tuple[str, str]:
    expires = (datetime.now(UTC) + timedelta(days=2)).isoformat()
    response = requests.post(
        f"{deployment.base}/api/files/{record_id}/links",
        headers=deployment.auth(),
        json={"expires_at": expires, "description": "Presse"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    link = response.json()
    return link["id"], link["url"].rsplit("/s/", 1)[1]


@pytest.mark.parametrize(
    "case", ["link revoked", "link creator deactivated", "token revoked", "record unreleased"]
)
def test_a_download_in_flight_ends_when_the_right_to_it_does(deployment: Deployment, case: str):
    record_id = upload(deployment)
    email = deployment.names["alice@example.org"]
    if case.startswith("link"):
        link_id, secret = create_link(deployment, record_id)
        path, headers = f"/api/shared/{secret}/files/{record_id}/download", {}
    elif case == "token revoked":
        path, headers = f"/api/files/{record_id}/download", deployment.auth()
    else:
        path, headers = f"/api/public/files/{record_id}/download", {}

    def withdraw() -> None:
        if case == "link revoked":
            answer = requests.delete(
                f"{deployment.base}/api/links/{link_id}", headers=deployment.auth(), timeout=30
            )
            assert answer.status_code == 204, answer.text
        elif case == "link creator deactivated":
            result = deployment.flask("users", "deactivate", email)
            assert result.returncode == 0, result.stderr
        elif case == "token revoked":
            answer = requests.delete(
                f"{deployment.base}/api/tokens/current", headers=headers, timeout=30
            )
            assert answer.status_code == 204, answer.text
            deployment.tokens.pop(email)
        else:
            answer = requests.patch(
                f"{deployment.base}/api/files/{record_id}",
                headers=deployment.auth(),
                json={"freigabe": False},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text

    length, before, after = slow_download(deployment, path, headers, withdraw)
    assert length == SIZE
    assert before + after < SIZE, "the whole file arrived after the right to it ended"
    assert after <= AFTER_AT_MOST, f"{after / MiB:.1f} MiB arrived after the revocation"


@pytest.mark.parametrize("door", ["kit", "account"])
def test_a_folder_zip_in_flight_ends_when_the_right_to_it_does(deployment: Deployment, door: str):
    """The same for the ZIP of a press kit (the link revoked) and of an account's folder (the
    token revoked)."""
    folder = f"presse/{door}-{time.time_ns()}"
    upload(deployment, folder)
    email = deployment.names["alice@example.org"]
    if door == "kit":
        expires = (datetime.now(UTC) + timedelta(days=2)).isoformat()
        created = requests.post(
            f"{deployment.base}/api/links",
            headers=deployment.auth(),
            json={"path": folder, "expires_at": expires},
            timeout=30,
        )
        assert created.status_code == 201, created.text
        link_id, secret = created.json()["id"], created.json()["url"].rsplit("/s/", 1)[1]
        path, headers = f"/api/shared/{secret}/files.zip", {}
    else:
        path, headers = f"/api/files.zip?path={folder}", deployment.auth()

    def withdraw() -> None:
        if door == "kit":
            answer = requests.delete(
                f"{deployment.base}/api/links/{link_id}", headers=deployment.auth(), timeout=30
            )
        else:
            answer = requests.delete(
                f"{deployment.base}/api/tokens/current", headers=headers, timeout=30
            )
            deployment.tokens.pop(email)
        assert answer.status_code == 204, answer.text

    length, before, after = slow_download(deployment, path, headers, withdraw)
    assert length > SIZE
    assert before + after < length, "the whole archive arrived after the right to it ended"
    assert after <= AFTER_AT_MOST, f"{after / MiB:.1f} MiB arrived after the revocation"


def test_a_download_nobody_withdraws_arrives_whole(deployment: Deployment):
    """Through many checks, a slow reader gets every byte."""
    record_id = upload(deployment)
    _, secret = create_link(deployment, record_id)
    length, before, after = slow_download(
        deployment,
        f"/api/shared/{secret}/files/{record_id}/download",
        {},
        lambda: None,
        rate=10 * MiB,
    )
    assert before + after == length == SIZE
