"""docs/nginx.conf, run for real: nginx (Debian's package) terminating TLS in front of the
service served by waitress with PROXY_COUNT=1, both on free loopback ports.

The client connects from 127.0.0.2 while nginx reaches the service from 127.0.0.1, so the
address the service logs tells which one it believed. Without nginx the test is skipped,
unless `REQUIRE_NGINX=1` (set by `.ci/run`; `make install-test` installs nginx as root) turns
the skip into a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import urllib3

from tests.support.api import encode_multipart
from tests.support.server import clean_env, flask, free_port, running_server, wait_for_port

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "nginx.conf"
HOST_NAME = "files.example.org"
CLIENT_ADDRESS = "127.0.0.2"
MiB = 1024 * 1024


def find_nginx() -> str:
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        reason = "nginx is not installed (make install-test installs it as root)"
        if os.environ.get("REQUIRE_NGINX") == "1":
            pytest.fail(f"REQUIRE_NGINX=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return found


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-keyout", str(key), "-out", str(cert), "-subj", f"/CN={HOST_NAME}"]
        + ["-addext", f"subjectAltName=DNS:{HOST_NAME}"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def site_config(app_port: int, http_port: int, https_port: int, cert: Path, key: Path) -> str:
    """The example with this machine's ports and certificate, each replacement counted so the
    example cannot drift away from what is tested."""
    text = EXAMPLE.read_text()
    for old, new, count in [
        ("listen 80;", f"listen 127.0.0.1:{http_port};", 1),
        ("listen 443 ssl default_server;", f"listen 127.0.0.1:{https_port} ssl default_server;", 1),
        ("listen 443 ssl;", f"listen 127.0.0.1:{https_port} ssl;", 1),
        ("server 127.0.0.1:8000;", f"server 127.0.0.1:{app_port};", 1),
        ("/etc/ssl/files.example.org/fullchain.pem", str(cert), 2),
        ("/etc/ssl/files.example.org/privkey.pem", str(key), 2),
    ]:
        assert text.count(old) == count, old
        text = text.replace(old, new)
    return text


def main_config(folder: Path) -> str:
    user = "user root;\n" if os.geteuid() == 0 else ""
    temp = "\n".join(
        f"    {kind}_temp_path {folder / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        f"{user}worker_processes 1;\npid {folder / 'nginx.pid'};\n"
        f"error_log {folder / 'error.log'} warn;\nevents {{ worker_connections 64; }}\n"
        f"http {{\n    access_log {folder / 'access.log'};\n{temp}\n"
        f"    include {folder / 'site.conf'};\n}}\n"
    )


@dataclass
class Stack:
    https_port: int
    http_port: int
    app_log: Path
    cert: Path
    env: dict[str, str]

    def pool(self) -> urllib3.HTTPSConnectionPool:
        """An HTTPS client from 127.0.0.2 that sends the service's host name (SNI and Host)
        and trusts only the test certificate."""
        return urllib3.HTTPSConnectionPool(
            "127.0.0.1",
            self.https_port,
            server_hostname=HOST_NAME,
            assert_hostname=HOST_NAME,
            ca_certs=str(self.cert),
            source_address=(CLIENT_ADDRESS, 0),
            retries=False,
            timeout=urllib3.Timeout(connect=5, read=60),
        )

    def request(self, pool: Any, method: str, path: str, headers: Any = None, **kw: Any) -> Any:
        """A request with the public host name (urllib3 replaces the pool's headers)."""
        host = {"Host": f"{HOST_NAME}:{self.https_port}"}
        return pool.request(method, path, headers={**host, **(headers or {})}, **kw)

    def access_log(self) -> list[dict[str, Any]]:
        """The service's own access log lines (JSON on stderr)."""
        lines = self.app_log.read_text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def logged(self, request_id: str) -> list[dict[str, Any]]:
        """The log lines of a request; the line is written once the response has gone out,
        which may be just after the client has it."""
        deadline = time.monotonic() + 10
        while True:
            found = [line for line in self.access_log() if line["request_id"] == request_id]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.05)


@contextmanager
def running_stack(
    folder: Path, env: dict[str, str], site: Callable[[str], str] = lambda text: text
) -> Iterator[Stack]:
    """The service with `env` behind nginx running the example, changed by `site`, with this
    machine's ports and certificate."""
    nginx = find_nginx()
    cert, key = self_signed_certificate(folder)
    http_port, https_port = free_port(), free_port()
    app_log = folder / "app.log"
    with running_server(env, app_log) as app_port:
        config = site(site_config(app_port, http_port, https_port, cert, key))
        (folder / "site.conf").write_text(config)
        (folder / "nginx.conf").write_text(main_config(folder))
        command = [nginx, "-e", str(folder / "error.log"), "-p", str(folder)]
        command += ["-c", str(folder / "nginx.conf")]
        checked = subprocess.run([*command, "-t"], capture_output=True, text=True, timeout=30)
        assert checked.returncode == 0, checked.stderr
        process = subprocess.Popen(
            [*command, "-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        try:
            wait_for_port(https_port, process, folder / "error.log", "nginx", timeout=20)
            yield Stack(https_port, http_port, app_log, cert, env)
        finally:
            process.send_signal(signal.SIGQUIT)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)


def create_user(env: dict[str, str]) -> None:
    created = flask("create-user", "--email", "alice@example.org", "--name", "Alice", "--password",
                    "a long passphrase", env=env)  # fmt: skip
    assert created.returncode == 0, created.stderr


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[Stack]:
    find_nginx()
    folder = tmp_path_factory.mktemp("reverse-proxy")
    shutil.copyfile(sqlite_template, folder / "db.sqlite3")
    (folder / "storage").mkdir(mode=0o700)
    env = clean_env(
        DATABASE_URL=f"sqlite:///{folder / 'db.sqlite3'}",
        STORAGE_LOCAL_ROOT=str(folder / "storage"),
        PROXY_COUNT="1",
        TRUSTED_HOSTS=HOST_NAME,
        RATELIMIT_TOKENS="1000 per minute",
    )
    create_user(env)
    with running_stack(folder, env) as running:
        yield running


@pytest.fixture(scope="module")
def token(stack: Stack) -> str:
    return sign_in(stack)


def sign_in(stack: Stack) -> str:
    with stack.pool() as pool:
        response = stack.request(
            pool,
            "POST",
            "/api/tokens",
            json={"email": "alice@example.org", "password": "a long passphrase", "token_name": "t"},
        )
    assert response.status == 201, response.data
    return response.json()["token"]


def upload_body(name: str, size: int, field: str = "files[]") -> tuple[str, bytes]:
    line = b"a line of text in a large upload\n"
    data = line * (size // len(line))
    return encode_multipart([(field, name, data, "text/plain")])


def test_client_address_host_and_scheme_reach_the_service(stack: Stack):
    forged = {
        "X-Forwarded-For": "203.0.113.9",
        "X-Forwarded-Host": "evil.example",
        "X-Forwarded-Proto": "http",
        "X-Request-ID": "proxy-test-1",
    }
    with stack.pool() as pool:
        response = stack.request(pool, "GET", "/api/public/files?page=1", headers=forged)
    assert response.status == 200, response.data
    base = f"https://{HOST_NAME}:{stack.https_port}"
    assert response.json()["path"] == f"{base}/api/public/files"
    assert response.json()["first_page_url"] == f"{base}/api/public/files?page=1"
    assert response.headers["Strict-Transport-Security"] == "max-age=31536000"
    assert [line["remote_addr"] for line in stack.logged("proxy-test-1")] == [CLIENT_ADDRESS]


def test_plain_http_is_redirected_to_https(stack: Stack):
    pool = urllib3.HTTPConnectionPool("127.0.0.1", stack.http_port, retries=False)
    with pool:
        response = pool.request(
            "GET", "/api/public/files", headers={"Host": HOST_NAME}, redirect=False
        )
    assert response.status == 301
    assert response.headers["Location"] == f"https://{HOST_NAME}/api/public/files"


def test_another_host_name_gets_no_answer(stack: Stack):
    with stack.pool() as pool, pytest.raises(urllib3.exceptions.ProtocolError):
        stack.request(pool, "GET", "/api/public/files", headers={"Host": "evil.example"})


def test_large_bodies_pass_only_on_upload_paths(stack: Stack, token: str):
    auth = {"Authorization": f"Bearer {token}"}
    content_type, body = upload_body("large.txt", 3 * MiB)
    with stack.pool() as pool:
        created = stack.request(
            pool, "POST", "/api/files", body=body, headers={**auth, "Content-Type": content_type}
        )
        assert created.status == 201, created.data
        record = created.json()["files"][0]
        assert record["size"] > 2 * MiB

        content_type, body = upload_body("larger.txt", 4 * MiB, field="file")
        replaced = stack.request(
            pool,
            "POST",
            f"/api/files/{record['id']}/content",
            body=body,
            headers={**auth, "Content-Type": content_type},
        )
        assert replaced.status == 200, replaced.data
        assert replaced.json()["size"] > 3 * MiB

        download = stack.request(
            pool,
            "GET",
            f"/api/files/{record['id']}/download",
            headers={**auth, "Range": "bytes=0-5"},
        )
        assert download.status == 206 and download.data == b"a line"

        large_json = json.dumps({"titel": "x" * (3 * MiB)}).encode()
        for method, path in [("PATCH", f"/api/files/{record['id']}"), ("POST", "/api/tokens")]:
            refused = stack.request(
                pool,
                method,
                path,
                body=large_json,
                headers={**auth, "Content-Type": "application/json", "X-Request-ID": "too-large"},
            )
            assert refused.status == 413, (path, refused.status)
            assert refused.json() == {"message": "The request body is too large."}
        later = stack.request(pool, "GET", "/healthz", headers={"X-Request-ID": "after-them"})
        assert later.status == 200
    # nginx refused them: the service logged the request after them, but never saw them.
    assert len(stack.logged("after-them")) == 1
    assert [line for line in stack.access_log() if line["request_id"] == "too-large"] == []
