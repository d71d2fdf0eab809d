"""A client that goes away mid-upload, and a server killed mid-upload, leave nothing behind."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.server import ROOT, clean_env, flask, free_port

MiB = 1024 * 1024
BOUNDARY = "interrupted"


TAIL = f"\r\n--{BOUNDARY}--\r\n".encode()


def head(size: int) -> bytes:
    part = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="files[]"; '
        f'filename="big.txt"\r\nContent-Type: text/plain\r\n\r\n'
    ).encode()
    request = (
        f"POST /api/files HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {{token}}\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        f"Content-Length: {len(part) + size + len(TAIL)}\r\n\r\n"
    ).encode()
    return request + part


@pytest.fixture
def deployment(tmp_path: Path):
    env = clean_env(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        STORAGE_LOCAL_ROOT=str(tmp_path / "storage"),
        ADMIN_EMAIL="a@example.org",
        ADMIN_PASSWORD="pw-12345",
    )
    for step in (("db", "upgrade"), ("provision-admin",)):
        assert flask(*step, env=env).returncode == 0
    return env, tmp_path


def start(env: dict, tmp_path: Path) -> tuple[subprocess.Popen, int, str]:
    port = free_port()
    log = open(tmp_path / f"server-{port}.log", "w")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(
        [sys.executable, "-m", "flask", "--app", "wsgi", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    process.log = log  # type: ignore[attr-defined]
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline and process.poll() is None, "server did not start"
            time.sleep(0.1)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        body = b'{"email": "a@example.org", "password": "pw-12345", "token_name": "t"}'
        sock.sendall(
            b"POST /api/tokens HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    token = answer.split(b'"token":"', 1)[1].split(b'"', 1)[0].decode()
    return process, port, token


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        process.wait(timeout=15)
    process.log.close()  # type: ignore[attr-defined]


def rows(tmp_path: Path) -> int:
    with sqlite3.connect(tmp_path / "db.sqlite3") as conn:
        return conn.execute("SELECT count(*) FROM file_records").fetchone()[0]


def leftovers(tmp_path: Path) -> list[str]:
    root = tmp_path / "storage"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_client_gone_mid_upload_leaves_nothing(deployment):
    env, tmp_path = deployment
    process, port, token = start(env, tmp_path)
    try:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(head(50 * MiB).replace(b"{token}", token.encode()))
        sock.sendall(b"x" * (20 * MiB))  # less than announced, then the client vanishes
        sock.close()
        time.sleep(1)
        assert process.poll() is None
        assert rows(tmp_path) == 0
        assert leftovers(tmp_path) == []
    finally:
        stop(process)


def test_server_killed_mid_upload_leaves_nothing_after_reconcile(deployment):
    env, tmp_path = deployment
    process, port, token = start(env, tmp_path)
    size = 400 * MiB
    tmp_dir = tmp_path / "storage" / ".tmp"
    try:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(head(size).replace(b"{token}", token.encode()))
        line = b"Ein Bericht, Zeile fuer Zeile.\n" * 33_000
        sent = 0
        while sent < size:
            chunk = line[: min(len(line), size - sent)]
            sock.sendall(chunk)
            sent += len(chunk)
        sock.sendall(TAIL)
        # Waitress has the body; the app now streams it into storage. Kill it in the middle.
        deadline = time.monotonic() + 30
        while not (tmp_dir.is_dir() and any(tmp_dir.iterdir())):
            assert time.monotonic() < deadline, "the upload never reached storage"
            time.sleep(0.002)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        sock.close()
    finally:
        stop(process)

    assert rows(tmp_path) == 0
    left = leftovers(tmp_path)
    assert left != []  # what the killed process was writing
    listed = flask("storage", "reconcile", "--grace-minutes", "0", env=env)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "abandoned unfinished uploads: 1 (run with --fix to discard)" in listed.stdout
    assert f"abandoned unfinished upload {Path(left[0]).name} (started " in listed.stdout
    assert leftovers(tmp_path) == left  # listed, not touched
    result = flask("storage", "reconcile", "--fix", "--grace-minutes", "0", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "abandoned unfinished uploads removed: 1" in result.stdout
    assert leftovers(tmp_path) == [] and rows(tmp_path) == 0
