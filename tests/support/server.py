"""Running the real thing: `flask` commands and `flask serve` (waitress) in child processes."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Settings of the developer's shell must not leak into the servers the tests start.
_SETTINGS_PREFIXES = (
    "S3_",
    "STORAGE_",
    "DATABASE_URL",
    "ADMIN_",
    "RATELIMIT_",
    "AWS_",
    "DOWNLOAD_",
    "STATS",
    "SERVER_",
)


#: What a running make hands its children.
_MAKE_VARIABLES = ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SETTINGS_PREFIXES)}
    # A user's shell is no make's child: under `make test` a `make` the test runs would
    # otherwise believe itself a sub-make and print "Entering directory" first.
    for name in _MAKE_VARIABLES:
        env.pop(name, None)
    # Nor may the secrets of a checkout's .env (docker compose's), which `flask` would load
    # when python-dotenv is installed (the test tools bring it).
    env["FLASK_SKIP_DOTENV"] = "1"
    # One process, as the tests of the server's memory and files expect, unless a test asks
    # for more (tests/test_processes.py); the default would be one per core.
    env["SERVER_PROCESSES"] = "1"
    env.update(settings)
    return env


def flask(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flask", "--app", "wsgi", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def wait_for_port(
    port: int, process: subprocess.Popen, log_path: Path, what: str, timeout: float = 30
) -> None:
    """Until `process` accepts connections on `port`; fails with its log if it ends or the
    time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{what} did not start: {log_path.read_text()}") from None
            time.sleep(0.05)


@contextmanager
def running_server(env: dict[str, str], log_path: Path) -> Iterator[int]:
    """`flask serve` on a free loopback port until the block ends; its output goes to a file."""
    with serving_process(env, log_path) as (port, _process):
        yield port


@contextmanager
def serving_process(
    env: dict[str, str], log_path: Path
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """`running_server`, with the server's process (for its memory and open files)."""
    port = free_port()
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "flask", "--app", "wsgi", "serve", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_port(port, process, log_path, "server", timeout=30)
            yield port, process
        finally:
            process.terminate()
            process.wait(timeout=15)


def request(
    port: int,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()
