"""Links in answers come from the configured public address or a trusted host, never from a
`Host` header nobody vouched for (it would put an attacker's links into shared caches)."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from werkzeug.datastructures import FileStorage
from werkzeug.test import encode_multipart

from tests.support import samples
from tests.support.api import Api
from tests.support.server import ROOT, clean_env, flask, free_port, request, wait_for_port

EVIL = {"Host": "evil.example"}


def page_links(body: dict[str, Any]) -> list[str]:
    names = ("first_page_url", "last_page_url", "next_page_url", "prev_page_url", "path")
    return [body[name] for name in names if body.get(name)]


def test_without_settings_links_use_the_host_the_client_asked_for(make_sqlite_app: Any):
    api = Api(app := make_sqlite_app(), app.test_client())
    alice = api.account("alice@example.org")
    host = {"Host": "files.lan:8000"}
    for path in ("/api/files", "/api/public/files"):
        body = api.get(path, alice, headers=host).get_json()
        links = page_links(body)
        assert links and all(link.startswith("http://files.lan:8000/") for link in links), links
        assert body["path"] == f"http://files.lan:8000{path}"


def test_without_settings_a_host_that_is_no_host_name_gives_the_servers_own(
    make_sqlite_app: Any,
):
    api = Api(app := make_sqlite_app(), app.test_client())
    body = api.client.get("/api/public/files", headers={"Host": "evil.example/x?"}).get_json()
    assert body["path"] == "http://localhost/api/public/files"


@pytest.mark.parametrize(
    "settings",
    [{"PUBLIC_BASE_URL": "https://files.example.org"}, {"PROXY_COUNT": 1}],
    ids=["public-base-url", "proxy-count"],
)
def test_with_an_address_setting_the_hosts_header_never_reaches_a_link(
    make_sqlite_app: Any, settings: dict[str, Any]
):
    app = make_sqlite_app(**settings)
    headers = {**EVIL, "X-Forwarded-Host": "files.example.org", "X-Forwarded-Proto": "https"}
    body = app.test_client().get("/api/public/files", headers=headers).get_json()
    assert body["path"] == "https://files.example.org/api/public/files"


def test_links_use_the_public_base_url(make_sqlite_app: Any):
    app = make_sqlite_app(PUBLIC_BASE_URL="https://files.example.org/")
    api = Api(app, app.test_client())
    alice = api.account("alice@example.org")
    body = api.get("/api/files", alice, headers=EVIL, query_string={"path": "a"}).get_json()
    assert body["first_page_url"] == "https://files.example.org/api/files?path=a&page=1"
    assert body["path"] == "https://files.example.org/api/files"


def test_trusted_hosts_refuse_other_hosts_and_name_the_trusted_one(make_sqlite_app: Any):
    app = make_sqlite_app(TRUSTED_HOSTS=["files.example.org"])
    api = Api(app, app.test_client())
    refused = api.client.get("/api/public/files", headers=EVIL)
    assert refused.status_code == 400
    assert refused.get_json() == {"message": "Host 'evil.example' is not trusted."}
    body = api.client.get("/api/public/files", headers={"Host": "files.example.org"}).get_json()
    assert body["path"] == "http://files.example.org/api/public/files"


@pytest.mark.parametrize("value", ["files.example.org", "ftp://x", "https://a b"])
def test_a_public_base_url_that_is_no_http_url_stops_start_up(make_sqlite_app: Any, value: str):
    from app.config import ConfigError

    with pytest.raises(ConfigError, match="PUBLIC_BASE_URL"):
        make_sqlite_app(PUBLIC_BASE_URL=value)


# Through real servers started the ways an operator starts them, with no address setting: every
# absolute link in an answer leads back to the server for the client that received it.

WARNING = "neither PUBLIC_BASE_URL nor TRUSTED_HOSTS set"


@pytest.fixture
def unset_env(tmp_path: Path) -> dict[str, str]:
    env = clean_env(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        STORAGE_LOCAL_ROOT=str(tmp_path / "storage"),
        ADMIN_EMAIL="admin@example.org",
        ADMIN_PASSWORD="admin-password",
    )
    for name in ("PUBLIC_BASE_URL", "TRUSTED_HOSTS", "PROXY_COUNT", "HOST", "PORT"):
        env.pop(name, None)
    for step in (("db", "upgrade"), ("provision-admin",)):
        result = flask(*step, env=env)
        assert result.returncode == 0, result.stderr
    return env


@contextmanager
def serving(command: list[str], env: dict[str, str], port: int, log_path: Path) -> Iterator[None]:
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
        try:
            wait_for_port(port, process, log_path, " ".join(command))
            yield
        finally:
            process.terminate()
            process.wait(timeout=15)


def publish(port: int) -> None:
    """A released report and a released episode, uploaded over HTTP."""
    credentials = {"email": "admin@example.org", "password": "admin-password", "token_name": "t"}
    status, _, body = request(
        port, "POST", "/api/tokens", json.dumps(credentials).encode(),
        {"Content-Type": "application/json"},
    )  # fmt: skip
    assert status == 201, body
    auth = {"Authorization": f"Bearer {json.loads(body)['token']}"}
    for name, data, path in (
        ("bericht.pdf", samples.pdf_bytes(), "reports/2026"),
        ("folge.mp3", samples.fixture("tone.mp3"), "podcasts"),
    ):
        fields = {"files[]": FileStorage(io.BytesIO(data), name), "path": path, "freigabe": "1"}
        _, payload = encode_multipart(fields, "b")
        headers = {**auth, "Content-Type": "multipart/form-data; boundary=b"}
        status, _, body = request(port, "POST", "/api/files", payload, headers)
        assert status == 201, body


def absolute_links(port: int) -> list[str]:
    """Every absolute link to the service in the public list, OAI-PMH and both feeds."""
    links: list[str] = []
    _, _, body = request(port, "GET", "/api/public/files")
    page = json.loads(body)
    links += page_links(page)
    for path in (
        "/oai?verb=Identify",
        "/oai?verb=ListRecords&metadataPrefix=oai_dc",
        "/api/public/feed.atom",
        "/api/public/podcast.rss",
    ):
        status, _, body = request(port, "GET", path)
        assert status == 200, body
        text = body.decode()
        links += re.findall(r"<baseURL>([^<]+)</baseURL>", text)
        links += re.findall(r"<dc:identifier>(http[^<]+)</dc:identifier>", text)
        links += re.findall(r'<link[^>]* href="([^"]+)"', text)
        links += re.findall(r'<enclosure[^>]* url="([^"]+)"', text)
    return links


def assert_followable(port: int, links: list[str]) -> None:
    # list page URLs, baseURL, 2 records x 2 identifiers, Atom 3 links each + feed, enclosure
    assert len(links) >= 12, links
    for link in links:
        url = urlsplit(link.replace("&amp;", "&"))
        assert (url.scheme, url.netloc) == ("http", f"127.0.0.1:{port}"), link
        status, _, _ = request(port, "GET", url.path + (f"?{url.query}" if url.query else ""))
        assert status == 200, link


def test_under_make_runs_flask_serve_links_lead_back_without_settings(
    unset_env: dict[str, str], tmp_path: Path
):
    """`make run` ends in `flask --app wsgi serve`, with `PORT` from the environment."""
    port = free_port()
    command = [sys.executable, "-m", "flask", "--app", "wsgi", "serve"]
    log = tmp_path / "serve.log"
    with serving(command, {**unset_env, "PORT": str(port)}, port, log):
        publish(port)
        assert_followable(port, absolute_links(port))
    assert WARNING not in log.read_text()  # loopback only: nothing to say


def test_under_waitress_serve_links_lead_back_and_listening_beyond_loopback_is_said(
    unset_env: dict[str, str], tmp_path: Path
):
    port = free_port()
    waitress_serve = str(Path(sys.executable).parent / "waitress-serve")
    command = [waitress_serve, f"--listen=0.0.0.0:{port}", "wsgi:app"]
    log = tmp_path / "waitress.log"
    with serving(command, unset_env, port, log):
        publish(port)
        assert_followable(port, absolute_links(port))
    warnings = [line for line in log.read_text().splitlines() if WARNING in line]
    assert len(warnings) == 1 and "0.0.0.0" in warnings[0], log.read_text()


@pytest.mark.parametrize(
    ("hosts", "settings", "warned"),
    [
        (["0.0.0.0"], {}, True),
        (["::"], {}, True),
        (["127.0.0.1", "::1"], {}, False),
        (["0.0.0.0"], {"PUBLIC_BASE_URL": "https://files.example.org"}, False),
        (["0.0.0.0"], {"TRUSTED_HOSTS": ["files.example.org"]}, False),
        (["0.0.0.0"], {"PROXY_COUNT": 1}, False),
    ],
)
def test_the_start_up_line_names_listening_beyond_loopback_with_no_address_set(
    make_sqlite_app: Any,
    caplog: pytest.LogCaptureFixture,
    hosts: list[str],
    settings: dict[str, Any],
    warned: bool,
):
    from app.server import warn_when_links_follow_any_host

    warn_when_links_follow_any_host(make_sqlite_app(**settings), hosts)
    assert any(WARNING in r.getMessage() for r in caplog.records) is warned


@pytest.mark.parametrize(
    ("argv", "hosts"),
    [
        (["/x/waitress-serve", "--listen=127.0.0.1:1", "--listen=[::1]:2", "w:a"],
         ["127.0.0.1", "::1"]),
        (["/x/waitress-serve", "wsgi:app"], ["0.0.0.0"]),
        (["/x/waitress-serve", "--host=127.0.0.1", "--port=9", "wsgi:app"], ["127.0.0.1"]),
        (["/x/flask", "--app", "wsgi", "serve"], None),
    ],
)  # fmt: skip
def test_waitress_serves_addresses_are_read_as_waitress_reads_them(
    argv: list[str], hosts: list[str] | None
):
    from app.server import waitress_serve_hosts

    assert waitress_serve_hosts(argv) == hosts
