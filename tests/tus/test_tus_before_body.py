"""A large PATCH the upload cannot take is answered by the real server from its headers,
before the client sends a byte of the body (waitress holds large bodies until admitted)."""

from __future__ import annotations

import base64
import json
import socket

import pytest
import requests

from tests.tus.conftest import Deployment, MiB

TUS = {"Tus-Resumable": "1.0.0"}


def answer_to_headers_only(
    deployment: Deployment, path: str, headers: dict[str, str], method: str = "PATCH"
) -> str:
    """Send a PATCH's head and none of its body; the server's answer, which must come
    without the body (the socket's timeout ends a wait for it)."""
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    request = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}\r\n".encode()
    with socket.create_connection(("127.0.0.1", deployment.port), timeout=10) as sock:
        sock.sendall(request)
        received = b""
        while b"\r\n\r\n" not in received or not received.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    return received.decode("latin-1")


@pytest.mark.parametrize("overridden", [False, True], ids=["PATCH", "POST as PATCH"])
@pytest.mark.parametrize("case", ["no such upload", "longer than the room", "wrong offset"])
def test_a_large_piece_it_cannot_take_is_answered_before_its_body(
    deployment: Deployment, case: str, overridden: bool
):
    """Also a POST with `X-HTTP-Method-Override: PATCH` (tus-js-client's
    `overridePatchMethod`): the server routes it as the PATCH it is."""
    auth = deployment.auth()
    created = requests.post(
        deployment.endpoint,
        headers={
            **TUS,
            **auth,
            "Upload-Length": str(4 * MiB),
            "Upload-Metadata": f"filename {base64.b64encode(b'bericht.txt').decode()}",
        },
        timeout=30,
    )
    path = upload = created.headers["Location"]
    size, offset, status = 2 * MiB, 0, 0
    if case == "no such upload":
        path, status = "/api/uploads/00000000-0000-4000-8000-000000000000", 404
    elif case == "longer than the room":
        size, status = 4 * MiB + 1, 413
    else:
        offset, status = 5, 409
    answer = answer_to_headers_only(
        deployment,
        path,
        {
            **TUS,
            **auth,
            "Upload-Offset": str(offset),
            "Content-Type": "application/offset+octet-stream",
            "Content-Length": str(size),
            **({"X-HTTP-Method-Override": "PATCH"} if overridden else {}),
        },
        "POST" if overridden else "PATCH",
    )
    status_line, _, rest = answer.partition("\r\n")
    assert status_line.startswith(f"HTTP/1.1 {status} "), answer
    head, _, body = rest.partition("\r\n\r\n")
    assert "Tus-Resumable: 1.0.0" in head.split("\r\n")
    assert "Content-Type: application/json" in head.split("\r\n")
    assert set(json.loads(body)) == {"message"}
    if case != "no such upload":
        state = requests.head(deployment.base + path, headers={**TUS, **auth}, timeout=30)
        assert state.headers["Upload-Offset"] == "0"
    assert requests.delete(deployment.base + upload, headers={**TUS, **auth}, timeout=30).ok


@pytest.mark.parametrize("case", ["too large (413)", "framing (400)", "no token (401)"])
def test_the_servers_own_answers_under_the_prefix_carry_the_tus_headers(
    deployment: Deployment, case: str
):
    """Waitress answers these itself, before the app sees the request: under /api/uploads
    they carry Tus-Resumable and Cache-Control: no-store as the app's answers do; elsewhere
    they do not."""
    headers = {**TUS, "Content-Type": "application/offset+octet-stream", "Upload-Offset": "0"}
    status = int(case[-4:-1])
    if case.startswith("too large"):
        headers.update({**deployment.auth(), "Content-Length": str(10**12)})
    elif case.startswith("framing"):
        headers.update({"Content-Length": "5", "Transfer-Encoding": "chunked"})
    else:
        headers.update({"Content-Length": str(2 * MiB)})
    upload = "/api/uploads/00000000-0000-4000-8000-000000000000"
    for path, tus in ((upload, True), ("/api/files", False)):
        answer = answer_to_headers_only(deployment, path, headers)
        status_line, _, rest = answer.partition("\r\n")
        assert status_line.startswith(f"HTTP/1.1 {status} "), answer
        head = rest.partition("\r\n\r\n")[0].split("\r\n")
        assert ("Tus-Resumable: 1.0.0" in head) is tus, answer
        assert ("Cache-Control: no-store" in head) is tus, answer
