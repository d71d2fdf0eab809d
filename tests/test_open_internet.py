"""`flask serve` against clients that misbehave on purpose, with nothing but sockets and no
login: stalled and slow readers, trickled headers, huge announced bodies, smuggling framing.

The server runs with two request threads, so that two clients holding a thread each would
already freeze it. `bench/open_internet.py` runs the same scenarios at full size.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.api import encode_multipart
from tests.support.server import clean_env, flask, request, serving_process

FILE_SIZE = 16 * 1024 * 1024
STALL_SECONDS = 2
HEADER_SECONDS = 2
SPOOL_MB = 24


class Server:
    def __init__(
        self, port: int, pid: int, token: str, record_id: str, data: bytes, workdir: Path
    ) -> None:
        self.port, self.pid, self.record_id, self.data = port, pid, record_id, data
        self.workdir = workdir
        self.auth = {"Authorization": f"Bearer {token}"}

    def connect(self, receive_buffer: int | None = None) -> socket.socket:
        sock = socket.socket()
        if receive_buffer:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.connect(("127.0.0.1", self.port))
        return sock

    def timed(self, method: str, path: str, body: bytes | None = None, **headers: str):
        started = time.monotonic()
        status, answer_headers, answer = request(self.port, method, path, body, headers)
        return status, answer_headers, answer, time.monotonic() - started

    def spooled_bytes(self) -> int:
        """Bytes in the server's temporary files (waitress spools request bodies there), not
        counting its own database and log in its work folder (also under /tmp)."""
        total = 0
        fd_dir = Path(f"/proc/{self.pid}/fd")
        for fd in fd_dir.iterdir():
            try:
                target = os.readlink(fd)
                own = target.startswith(f"{self.workdir}/") and "(deleted)" not in target
                if (target.startswith("/tmp") or "(deleted)" in target) and not own:
                    total += os.stat(fd).st_size
            except OSError:
                continue
        return total


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("open-internet")
    env = clean_env(
        DATABASE_URL=f"sqlite:///{tmp / 'db.sqlite3'}",
        STORAGE_LOCAL_ROOT=str(tmp / "storage"),
        ADMIN_EMAIL="admin@example.org",
        ADMIN_PASSWORD="admin-password",
        SERVER_THREADS="2",
        CLIENT_STALL_SECONDS=str(STALL_SECONDS),
        HEADER_TIMEOUT_SECONDS=str(HEADER_SECONDS),
        SPOOL_LIMIT_MB=str(SPOOL_MB),
        RATELIMIT_TOKENS="1000 per minute",
        RATELIMIT_UPLOADS="1000 per minute",
    )
    for step in (("db", "upgrade"), ("provision-admin",)):
        assert flask(*step, env=env).returncode == 0
    with serving_process(env, tmp / "server.log") as (port, process):
        login = json.dumps(
            {"email": "admin@example.org", "password": "admin-password", "token_name": "t"}
        ).encode()
        status, _, body = request(
            port, "POST", "/api/tokens", login, {"Content-Type": "application/json"}
        )
        assert status == 201
        token = json.loads(body)["token"]
        data = (b"0123456789abcdef" * 64 + b"\n") * (FILE_SIZE // 1025)
        content_type, form = encode_multipart([("files[]", "video.txt", data, "text/plain")])
        status, _, body = request(
            port,
            "POST",
            "/api/files",
            form,
            {"Authorization": f"Bearer {token}", "Content-Type": content_type},
        )
        assert status == 201, body
        yield Server(port, process.pid, token, json.loads(body)["files"][0]["id"], data, tmp)


def login_body() -> bytes:
    return json.dumps(
        {"email": "admin@example.org", "password": "admin-password", "token_name": "t2"}
    ).encode()


def assert_served_quickly(server: Server) -> None:
    """/healthz, a token login and a metadata read, each within a second."""
    checks = [
        ("GET", "/healthz", None, {}),
        ("POST", "/api/tokens", login_body(), {"Content-Type": "application/json"}),
        ("GET", f"/api/public/files/{server.record_id}", None, {}),
    ]
    for method, path, body, headers in checks:
        status, _, _, took = server.timed(method, path, body, **headers)
        assert status in (200, 201), path
        assert took < 1.0, (path, took)


def read_until_closed(sock: socket.socket, deadline: float) -> int:
    received = 0
    sock.settimeout(0.5)
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(1 << 20)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += len(chunk)
    raise AssertionError("the server kept the connection open")


def start_download(server: Server, sock: socket.socket, extra: str = "") -> None:
    path = f"/api/public/files/{server.record_id}/download"
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n".encode())


def test_stalled_readers_hold_no_thread_and_are_disconnected(server: Server):
    stalled = [server.connect(receive_buffer=4096) for _ in range(20)]
    for sock in stalled[:10]:
        start_download(server, sock)
    for sock in stalled[10:]:  # small bodies take the request thread's path: no wait there
        start_download(server, sock, "Range: bytes=0-1048575\r\n")
    time.sleep(0.5)

    assert_served_quickly(server)

    time.sleep(STALL_SECONDS + 2)  # the idle check runs every second
    for sock in stalled:
        received = read_until_closed(sock, time.monotonic() + 5)
        assert received < len(server.data)  # what was in flight, then the server hung up
        sock.close()


def test_a_slow_reader_that_keeps_reading_gets_the_whole_file(server: Server):
    sock = server.connect(receive_buffer=4096)
    start_download(server, sock)
    received = bytearray()
    deadline = time.monotonic() + STALL_SECONDS * 2 + 1
    while time.monotonic() < deadline:  # slower than the stall limit in total, never stalled
        received += sock.recv(16 * 1024)
        time.sleep(0.2)
    sock.settimeout(10)
    while True:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        received += chunk
        head, _, body = bytes(received).partition(b"\r\n\r\n")
        if len(body) >= FILE_SIZE:
            break
    head, _, body = bytes(received).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert body == server.data
    sock.close()


def test_trickled_headers_lock_nobody_out_and_are_closed(server: Server):
    idle = [server.connect() for _ in range(500)]  # connected, never a byte
    trickling = []
    for _ in range(1000):
        sock = server.connect()
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        trickling.append(sock)
    started = time.monotonic()
    for round_ in range(3):
        for sock in trickling:
            sock.sendall(f"X-Trickle-{round_}: 1\r\n".encode())
        assert_served_quickly(server)
        time.sleep(0.5)

    closed = 0
    deadline = started + HEADER_SECONDS + 6
    for sock in trickling:
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            if sock.recv(1024) == b"":
                closed += 1
        except (ConnectionResetError, TimeoutError):
            pass
        sock.close()
    assert closed == len(trickling)
    for sock in idle:
        sock.close()


def raw_answer(sock: socket.socket, timeout: float = 5) -> tuple[int, dict[str, str], bytes]:
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        body += sock.recv(65536)
    return int(lines[0].split()[1]), headers, body


def announce(server: Server, length: int, *, auth: bool, extra: str = "") -> socket.socket:
    sock = server.connect()
    token = f"Authorization: {server.auth['Authorization']}\r\n" if auth else ""
    sock.sendall(
        (
            "POST /api/files HTTP/1.1\r\nHost: t\r\n"
            "Content-Type: multipart/form-data; boundary=x\r\n"
            f"{token}Content-Length: {length}\r\n{extra}\r\n"
        ).encode()
        + b"x" * 65536
    )
    return sock


@pytest.mark.parametrize(
    "authorization", [None, "Bearer 1|not-the-secret", "Bearer ²|x", "Basic YTpi"]
)
def test_a_large_body_without_a_valid_token_is_refused_before_it_is_read(
    server: Server, authorization: str | None
):
    sock = server.connect()
    header = f"Authorization: {authorization}\r\n" if authorization else ""
    sock.sendall(
        (
            f"POST /api/files HTTP/1.1\r\nHost: t\r\n{header}"
            "Content-Type: multipart/form-data; boundary=x\r\nContent-Length: 1073741824\r\n\r\n"
        ).encode()
        + b"x" * 65536
    )
    status, headers, body = raw_answer(sock)
    assert status == 401
    assert headers["www-authenticate"] == "Bearer"
    assert json.loads(body) == {"message": "Unauthenticated."}
    assert server.spooled_bytes() <= 1024 * 1024
    sock.close()


def test_unauthenticated_chunked_bodies_are_refused_and_small_bodies_pass(server: Server):
    sock = server.connect()
    sock.sendall(
        b"POST /api/tokens HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n10\r\n" + b"[" * 16 + b"\r\n"
    )
    assert raw_answer(sock)[0] == 401
    sock.close()
    status, _, _, _ = server.timed(
        "POST", "/api/tokens", login_body(), **{"Content-Type": "application/json"}
    )
    assert status == 201


def test_bodies_beyond_the_spool_limit_get_503_before_they_are_read(server: Server):
    too_big = announce(server, SPOOL_MB * 2**20 + 1, auth=True)
    status, headers, body = raw_answer(too_big)
    assert status == 503
    assert headers["retry-after"] == "30"
    assert "try again" in json.loads(body)["message"]
    too_big.close()

    # Two uploads that fit one at a time but not together: the second waits for the first.
    first = announce(server, 13 * 2**20, auth=True)
    time.sleep(0.3)
    second = announce(server, 13 * 2**20, auth=True)
    assert raw_answer(second)[0] == 503
    second.close()
    first.close()  # gone mid-body: its reservation is given back
    time.sleep(0.5)

    # One after the other, more than the limit in all: each gives its share back when done.
    content_type, form = encode_multipart(
        [("files[]", "a.txt", b"fits\n" * 2_000_000, "text/plain")]
    )
    for _ in range(4):
        status, _, _, _ = server.timed(
            "POST", "/api/files", form, **server.auth, **{"Content-Type": content_type}
        )
        assert status == 201


def test_an_authenticated_chunked_upload_is_received(server: Server):
    content_type, form = encode_multipart([("files[]", "c.txt", b"chunked\n" * 300_000, None)])
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.putrequest("POST", "/api/files")
    conn.putheader("Authorization", server.auth["Authorization"])
    conn.putheader("Content-Type", content_type)
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    for start in range(0, len(form), 1 << 20):
        piece = form[start : start + (1 << 20)]
        conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
    conn.send(b"0\r\n\r\n")
    response = conn.getresponse()
    assert response.status == 201, response.read()
    assert json.loads(response.read())["files"][0]["size"] == 8 * 300_000
    conn.close()


def test_content_length_with_transfer_encoding_is_400(server: Server):
    sock = server.connect()
    sock.sendall(
        b"POST /api/tokens HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    )
    status, _, body = raw_answer(sock)
    assert status == 400
    assert json.loads(body) == {"message": "Bad request."}
    sock.close()
