"""A folder archive through the real server (waitress sends it from its event loop)."""

from __future__ import annotations

import hashlib
import io
import json
import socket
import zipfile

import pytest
import requests

from tests.tus.conftest import Deployment, MiB, text_content


def test_archive_streams_from_the_real_server(deployment: Deployment):
    files = {f"teil-{n}.txt": text_content(3 * MiB + n, seed=f"zip{n}") for n in range(3)}
    for name, data in files.items():
        response = requests.post(
            f"{deployment.base}/api/files",
            headers=deployment.auth(),
            files={"files[]": (name, data)},
            data={"path": "archiv/2026"},
            timeout=60,
        )
        assert response.status_code == 201, response.text
    response = requests.get(
        f"{deployment.base}/api/files.zip",
        params={"path": "archiv/"},
        headers=deployment.auth(),
        timeout=120,
    )
    assert response.status_code == 200
    body = response.content
    assert int(response.headers["Content-Length"]) == len(body)
    archive = zipfile.ZipFile(io.BytesIO(body))
    assert archive.testzip() is None
    manifest = json.loads(archive.read("manifest.json"))
    assert sorted(item["entry"] for item in manifest["files"]) == [
        f"archiv/2026/{name}" for name in sorted(files)
    ]
    for item in manifest["files"]:
        data = archive.read(item["entry"])
        assert data == files[item["original_name"]]
        assert hashlib.sha256(data).hexdigest() == item["sha256"]


def test_a_member_deleted_while_the_archive_streams_cuts_it_short(deployment: Deployment):
    """The decision of docs/security.md ("Folder archives"): a deleted record's content is
    not sent on; the archive ends before its announced length and no unpacker accepts it."""
    ids = {}
    for name, size in (("a-big.txt", 8 * MiB), ("b-small.txt", 1000)):
        response = requests.post(
            f"{deployment.base}/api/files",
            headers=deployment.auth(),
            files={"files[]": (name, text_content(size, seed=name))},
            data={"path": "cut/2026"},
            timeout=60,
        )
        assert response.status_code == 201, response.text
        ids[name] = response.json()["files"][0]["id"]
    with socket.socket() as client:
        # A small receive window: with the server's send buffer (4 MiB at most) the archive
        # cannot have reached the small file behind 8 MiB before the client reads on.
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        client.settimeout(60)
        client.connect(("127.0.0.1", deployment.port))
        authorization = deployment.auth()["Authorization"]
        client.sendall(
            b"GET /api/files.zip?path=cut/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + f"Authorization: {authorization}\r\nConnection: close\r\n\r\n".encode()
        )
        received = b""
        while b"\r\n\r\n" not in received:
            received += client.recv(65536)
        head, body = received.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200 ")
        length = int(
            next(
                line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
            ).split(b":")[1]
        )
        deleted = requests.delete(
            f"{deployment.base}/api/files/{ids['b-small.txt']}",
            headers=deployment.auth(),
            timeout=60,
        )
        assert deleted.status_code == 204
        while chunk := client.recv(1024 * 1024):
            body += chunk
    assert 8 * MiB < len(body) < length
    with pytest.raises(zipfile.BadZipFile):
        zipfile.ZipFile(io.BytesIO(body))
