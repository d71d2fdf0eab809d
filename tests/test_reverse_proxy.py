"""docs/nginx.conf, run for real: nginx (Debian's package) terminating TLS in front of the
service served by waitress with PROXY_COUNT=1, both on free loopback ports.

The client connects from 127.0.0.2 while nginx reaches the service from 127.0.0.1, so the
address the service logs tells which one it believed. Without nginx the test is skipped,
unless `REQUIRE_NGINX=1` (set by `.ci/run`; `make install-test` installs nginx as root) turns
the skip into a failure.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import urllib3

from tests.support.api import encode_multipart
from tests.support.server import clean_env, flask, free_port, running_server, wait_for_port

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "nginx.conf"
DEPLOYMENT = ROOT / "docs" / "deployment.md"
HOST_NAME = "files.example.org"
CLIENT_ADDRESS = "127.0.0.2"
MiB = 1024 * 1024
#: The storage folder of the example's internal location (local) and the S3 endpoint of its
#: commented-out S3 location.
EXAMPLE_STORAGE = "/var/lib/file-repository/storage/"
EXAMPLE_S3 = "https://s3.example.org/"


def documented_settings() -> dict[str, str]:
    """The settings docs/deployment.md gives for running behind docs/nginx.conf: the lines of
    the first `sh` block of its section "Behind a reverse proxy"."""
    text = DEPLOYMENT.read_text()
    section = text[text.index("## Behind a reverse proxy\n") :]
    start = section.index("```sh\n") + len("```sh\n")
    block = section[start : section.index("```", start)]
    settings = dict(line.split("=", 1) for line in block.splitlines() if line.strip())
    assert all(re.fullmatch(r"[A-Z][A-Z0-9_]*", name) for name in settings), settings
    return settings


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
    app_port: int = 0

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
            yield Stack(https_port, http_port, app_log, cert, env, app_port)
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
    """The service with the documented settings for it behind the example as documented: the
    local internal location on, its folder the service's storage folder."""
    find_nginx()
    folder = tmp_path_factory.mktemp("reverse-proxy")
    shutil.copyfile(sqlite_template, folder / "db.sqlite3")
    (folder / "storage").mkdir(mode=0o700)
    settings = documented_settings()
    assert settings["PROXY_COUNT"] == "1" and settings["DOWNLOAD_OFFLOAD"] == "nginx"
    assert settings["TRUSTED_HOSTS"] == HOST_NAME
    assert f"{settings['STORAGE_LOCAL_ROOT']}/" == EXAMPLE_STORAGE
    env = clean_env(
        **{
            **settings,
            "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}",
            "STORAGE_LOCAL_ROOT": str(folder / "storage"),
            "RATELIMIT_TOKENS": "1000 per minute",
        }
    )
    create_user(env)
    with running_stack(folder, env, offload_site("local", f"{folder / 'storage'}/")) as running:
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
    # The real client (not the forged one), truncated to its /24 by default.
    assert [line["remote_addr"] for line in stack.logged("proxy-test-1")] == ["127.0.0.0"]


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


def test_the_documented_setup_has_nginx_send_the_bytes(stack: Stack, token: str):
    """The documented settings behind the example: the service answers the download without a
    body (its log says 0 bytes), nginx sends all of them."""
    data = b"sent by nginx, not by the service\n" * 40000
    with stack.pool() as pool:
        record = upload(stack, pool, token, data)
        path = f"/api/public/files/{record['id']}/download"
        whole = stack.request(pool, "GET", path, headers={"X-Request-ID": "offloaded"})
        assert (whole.status, whole.data) == (200, data)
        part = stack.request(
            pool, "GET", path, headers={"Range": "bytes=10-19", "X-Request-ID": "offloaded"}
        )
        assert (part.status, part.data) == (206, data[10:20])
        assert "X-Accel-Redirect" not in whole.headers and "X-Accel-Redirect" not in part.headers
    logged = stack.logged("offloaded")
    deadline = time.monotonic() + 10
    while len(logged) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
        logged = stack.logged("offloaded")
    # The service answered both with 200 and the redirect, nginx made the second a 206: the
    # line says what the client got, and that nginx sent the bytes.
    assert [(line["status"], line["bytes"], line["offloaded"]) for line in logged] == [
        (200, 0, True),
        (206, 0, True),
    ]


# --- DOWNLOAD_OFFLOAD=nginx: the service authorises, nginx sends the bytes ---------------

LOCAL_BLOCK = "    # --- local storage:"
S3_BLOCK = "    # --- S3 storage:"


def offload_site(backend: str, target: str) -> Callable[[str], str]:
    """The example with the internal location of `backend` only (the S3 one uncommented),
    pointing at this test's storage folder or S3 server."""

    def change(text: str) -> str:
        start, middle = text.index(LOCAL_BLOCK), text.index(S3_BLOCK)
        end = text.index("\n\n", middle) + 1
        local, s3 = text[start:middle], text[middle:end]
        if backend == "local":
            assert local.count(EXAMPLE_STORAGE) == 1
            chosen = local.replace(EXAMPLE_STORAGE, target)
        else:
            assert s3.count(EXAMPLE_S3) == 1
            chosen = re.sub(r"(?m)^    # (?=location |    [^#]|\})", "    ", s3)
            chosen = chosen.replace(EXAMPLE_S3, target)
        return text[:start] + chosen + text[end:]

    return change


@dataclass
class OffloadStack:
    stack: Stack
    backend: str
    stored_path: Callable[[str], str]
    remove: Callable[[str], None]


@pytest.fixture(
    scope="module",
    params=[
        "sqlite-local",
        pytest.param("postgres-s3", marks=[pytest.mark.postgres, pytest.mark.s3server]),
    ],
)
def offload(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OffloadStack]:
    """On local storage the documented stack itself; on S3 the same settings with the S3
    location of the example in place of the local one."""

    def stored_path_in(engine: sa.Engine) -> Callable[[str], str]:
        def stored_path(record_id: str) -> str:
            record = sa.table("file_records", sa.column("id", sa.Uuid), sa.column("stored_path"))
            query = sa.select(record.c.stored_path).where(record.c.id == uuid.UUID(record_id))
            with engine.connect() as conn:
                return conn.scalar(query)

        return stored_path

    if request.param == "sqlite-local":
        stack: Stack = request.getfixturevalue("stack")
        storage = Path(stack.env["STORAGE_LOCAL_ROOT"])
        engine = sa.create_engine(stack.env["DATABASE_URL"])
        try:
            yield OffloadStack(
                stack, "local", stored_path_in(engine), lambda key: (storage / key).unlink()
            )
        finally:
            engine.dispose()
        return

    from tests.conftest import migrate_database

    find_nginx()
    folder = tmp_path_factory.mktemp("offload")
    settings = documented_settings()
    del settings["STORAGE_LOCAL_ROOT"]
    seaweedfs = request.getfixturevalue("seaweedfs")
    database = request.getfixturevalue("make_postgres_database")()
    migrate_database(database, folder)
    bucket = f"offload-{uuid.uuid4().hex[:12]}"
    client = seaweedfs.client()
    client.create_bucket(Bucket=bucket)
    env = clean_env(
        **settings,
        DATABASE_URL=database,
        AWS_ACCESS_KEY_ID=seaweedfs.access_key,
        AWS_SECRET_ACCESS_KEY=seaweedfs.secret_key,
        **{name: str(value) for name, value in seaweedfs.storage_config(bucket).items()},
        RATELIMIT_TOKENS="1000 per minute",
    )
    create_user(env)
    engine = sa.create_engine(database)

    def remove(key: str) -> None:
        client.delete_object(Bucket=bucket, Key=key)

    try:
        site = offload_site("s3", f"{seaweedfs.endpoint_url}/")
        with running_stack(folder, env, site) as running:
            yield OffloadStack(running, "s3", stored_path_in(engine), remove)
    finally:
        engine.dispose()
        for item in client.list_objects_v2(Bucket=bucket).get("Contents", []):
            client.delete_object(Bucket=bucket, Key=item["Key"])
        client.delete_bucket(Bucket=bucket)
        client.close()


FUTURE = "Fri, 01 Jan 2100 00:00:00 GMT"
PUBLIC_CACHE = "public, max-age=0, must-revalidate"
NAME = "Jahresbericht \u00e4\u00f6 2025.txt"
DISPOSITION = (
    'attachment; filename="Jahresbericht ao 2025.txt"; '
    "filename*=UTF-8''Jahresbericht%20%C3%A4%C3%B6%202025.txt"
)


def upload(stack: Stack, pool: Any, token: str, data: bytes, **fields: str) -> dict[str, Any]:
    parts = [("files[]", NAME, data, "text/plain")]
    parts += [(name, None, value.encode(), None) for name, value in fields.items()]
    content_type, body = encode_multipart(parts)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type}
    created = stack.request(pool, "POST", "/api/files", body=body, headers=headers)
    assert created.status == 201, created.data
    return created.json()["files"][0]


def contract_headers(response: Any, data: bytes, cache_control: str) -> None:
    """Every header the contract names, as the service sets it, and nothing of the proxy's
    own validators, the internal location or S3."""
    digest = hashlib.sha256(data).digest()
    headers = response.headers
    assert headers["Content-Type"] == "text/plain"
    assert headers["Content-Disposition"] == DISPOSITION
    assert headers["ETag"] == f'"{digest.hex()}"'
    assert headers["Repr-Digest"] == f"sha-256=:{base64.b64encode(digest).decode()}:"
    assert headers["Cache-Control"] == cache_control
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Accept-Ranges"] == "bytes"
    assert headers["Strict-Transport-Security"] == "max-age=31536000"
    for name, values in headers.items():
        assert len(headers.getlist(name)) == 1, (name, headers.getlist(name))
        assert not name.lower().startswith("x-amz"), name
        assert "X-Amz" not in values and "_stored" not in values, (name, values)
    for name in ["X-Accel-Redirect", "X-Offload-Content-Disposition", "Last-Modified"]:
        assert name not in headers


def test_offloaded_downloads_carry_the_contract(offload: OffloadStack):
    stack = offload.stack
    token = sign_in(stack)
    auth = {"Authorization": f"Bearer {token}"}
    data = bytes(range(32, 127)) * 30000 + b"\n"  # about 2.7 MiB of printable text
    size = len(data)
    with stack.pool() as pool:
        record = upload(stack, pool, token, data)
        doors = [
            (f"/api/files/{record['id']}/download", auth, "private, no-store"),
            (
                f"/api/public/files/{record['id']}/download",
                {},
                "public, max-age=0, must-revalidate",
            ),
        ]
        for path, headers, cache_control in doors:
            whole = stack.request(pool, "GET", path, headers={**headers, "X-Request-ID": "whole"})
            assert whole.status == 200 and whole.data == data, path
            assert whole.headers["Content-Length"] == str(size)
            assert whole.headers["X-Request-ID"] == "whole"
            contract_headers(whole, data, cache_control)
            etag = whole.headers["ETag"]

            for asked, start, end in [("1000-1999", 1000, 1999), ("-10", size - 10, size - 1),
                                      (f"{size - 5}-{size + 100}", size - 5, size - 1),
                                      (f"-{size + 1}", 0, size - 1)]:  # fmt: skip
                part = stack.request(
                    pool,
                    "GET",
                    path,
                    headers={**headers, "Range": f"bytes={asked}", "X-Request-ID": "part"},
                )
                assert part.status == 206, (path, asked)
                assert part.data == data[start : end + 1]
                assert part.headers["Content-Range"] == f"bytes {start}-{end}/{size}"
                assert part.headers["Content-Length"] == str(end - start + 1)
                contract_headers(part, data, cache_control)

            # If-Range naming the ETag keeps the range; any other value gets the whole file.
            kept = stack.request(
                pool, "GET", path, headers={**headers, "Range": "bytes=0-9", "If-Range": etag}
            )
            assert (kept.status, kept.data) == (206, data[:10])
            stale = stack.request(
                pool, "GET", path, headers={**headers, "Range": "bytes=0-9", "If-Range": '"old"'}
            )
            assert (stale.status, stale.data) == (200, data)
            for odd in ["bytes=0-1,5-6", "bytes=x-y", "lines=1-2"]:
                answer = stack.request(pool, "GET", path, headers={**headers, "Range": odd})
                assert (answer.status, answer.data) == (200, data), odd

            beyond = stack.request(
                pool, "GET", path, headers={**headers, "Range": f"bytes={size}-"}
            )
            assert beyond.status == 416
            assert beyond.headers["Content-Range"] == f"bytes */{size}"
            assert beyond.json() == {"message": "The requested range is not satisfiable."}

            # Only the service's ETag is a validator: nginx's own would answer these with 304.
            for validator in [{"If-None-Match": '"other"'}, {"If-Modified-Since": FUTURE}]:
                fresh = stack.request(pool, "GET", path, headers={**headers, **validator})
                assert (fresh.status, fresh.data) == (200, data), validator

            cached = stack.request(pool, "GET", path, headers={**headers, "If-None-Match": etag})
            assert (cached.status, cached.data) == (304, b"")
            assert cached.headers["ETag"] == etag
            assert cached.headers["Cache-Control"] == cache_control

            head = stack.request(pool, "HEAD", path, headers=headers)
            assert head.status == 200 and head.data == b""
            assert head.headers["Content-Length"] == str(size)
            contract_headers(head, data, cache_control)

    # The service saw and logged every download as before, with the status the client got.
    logged = [line for line in stack.access_log() if line["request_id"] == "whole"]
    assert [line["status"] for line in logged] == [200, 200]
    parts = [line for line in stack.access_log() if line["request_id"] == "part"]
    assert [(line["status"], line["offloaded"]) for line in parts] == [(206, True)] * 8


def test_the_internal_location_is_not_reachable_from_outside(offload: OffloadStack):
    stack = offload.stack
    token = sign_in(stack)
    with stack.pool() as pool:
        record = upload(stack, pool, token, b"only through the service\n")
        stored_path = offload.stored_path(record["id"])
        paths = [
            "/_stored/",
            "/_stored",
            f"/_stored/{stored_path}",
            f"/api/../_stored/{stored_path}",
        ]
        if offload.backend == "s3":
            paths.append(f"/_stored/{stack.env['S3_BUCKET']}/{stored_path}")
        for path in paths:
            answer = stack.request(pool, "GET", path, headers={"Authorization": f"Bearer {token}"})
            assert answer.status == 404, path
            assert b"only through the service" not in answer.data
        released = stack.request(pool, "GET", f"/api/public/files/{record['id']}/download")
        assert released.data == b"only through the service\n"


def test_unreleased_and_embargoed_content_is_never_sent(offload: OffloadStack):
    stack = offload.stack
    token = sign_in(stack)
    auth = {"Authorization": f"Bearer {token}"}
    secret = b"not yet for anyone's eyes\n"
    with stack.pool() as pool:
        unreleased = upload(stack, pool, token, secret, freigabe="false")
        embargoed = upload(stack, pool, token, secret, sperrfrist="2999-01-01")
        for record, protected, public in [(unreleased, 403, 404), (embargoed, 403, 403)]:
            for path, headers, status in [
                (f"/api/files/{record['id']}/download", auth, protected),
                (f"/api/public/files/{record['id']}/download", {}, public),
            ]:
                for extra in [{}, {"Range": "bytes=0-4"}]:
                    answer = stack.request(pool, "GET", path, headers={**headers, **extra})
                    assert answer.status == status, (path, extra)
                    assert secret not in answer.data and "message" in answer.json()
                    assert "X-Accel-Redirect" not in answer.headers


def test_a_lost_object_is_the_services_error_not_the_storages(offload: OffloadStack):
    """Whoever finds the object missing (the service for local files, nginx asking S3), the
    client gets the service's JSON answer, never the storage's own."""
    stack = offload.stack
    token = sign_in(stack)
    with stack.pool() as pool:
        record = upload(stack, pool, token, b"soon lost\n")
        offload.remove(offload.stored_path(record["id"]))
        for path, headers, cache_control in [
            (
                f"/api/files/{record['id']}/download",
                {"Authorization": f"Bearer {token}"},
                [None, "private, no-store"],
            ),
            (f"/api/public/files/{record['id']}/download", {}, [PUBLIC_CACHE]),
        ]:
            answer = stack.request(pool, "GET", path, headers=headers)
            assert answer.status == 500, path
            assert answer.headers["Content-Type"] == "application/json"
            assert "Content-Disposition" not in answer.headers
            # nginx's error page keeps the service's private Cache-Control; never a public one.
            assert answer.headers.get("Cache-Control") in cache_control
            assert answer.json() == {
                "message": "Server error: the stored content of this file is missing."
            }
