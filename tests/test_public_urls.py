"""Links in answers come from the configured public address or a trusted host, never from a
`Host` header nobody vouched for (it would put an attacker's links into shared caches)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.api import Api

EVIL = {"Host": "evil.example"}


def page_links(body: dict[str, Any]) -> list[str]:
    names = ("first_page_url", "last_page_url", "next_page_url", "prev_page_url", "path")
    return [body[name] for name in names if body.get(name)]


def test_without_settings_links_use_the_servers_own_name(make_sqlite_app: Any):
    api = Api(app := make_sqlite_app(), app.test_client())
    alice = api.account("alice@example.org")
    for path in ("/api/files", "/api/public/files"):
        body = api.get(path, alice, headers=EVIL).get_json()
        links = page_links(body)
        assert links and all(link.startswith("http://localhost/") for link in links), links
        assert body["path"] == f"http://localhost{path}"


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
