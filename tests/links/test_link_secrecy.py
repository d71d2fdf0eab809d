"""A link's secret does not leak and cannot be guessed cheaply (issue 24 item 3): not in the
access log, the error bodies or the trail; failed lookups are rate limited per address."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from flask.testing import FlaskClient

from app import create_app
from app.access_log import JSONFormatter
from app.extensions import db
from app.links import services
from app.storage import StorageUnavailable
from tests.links.test_links import record_link, secret_of
from tests.support.api import Account, Api


def test_the_access_log_names_the_link_not_its_secret(
    api: Api, alice: Account, caplog: pytest.LogCaptureFixture
) -> None:
    record = api.create(alice, "a.txt", b"hello\n")
    link = record_link(api, alice, record["id"]).get_json()
    secret = secret_of(link)
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        api.client.get(f"/api/shared/{secret}", buffered=True)
        api.client.get(f"/api/shared/{secret}/files/{record['id']}/download", buffered=True)
        api.client.get(f"/api/shared/{'B' * 43}/files.zip", buffered=True)
    formatter = JSONFormatter()
    lines = [json.loads(formatter.format(r)) for r in caplog.records if r.name == "app.access"]
    assert [line["path"] for line in lines] == [
        f"/api/shared/link:{link['id']}",
        f"/api/shared/link:{link['id']}/files/{record['id']}/download",
        "/api/shared/link:unknown/files.zip",
    ]
    everything = "\n".join(formatter.format(r) for r in caplog.records)
    assert secret not in everything and "B" * 43 not in everything


def test_the_stored_hash_is_compared_in_constant_time(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = api.create(alice)
    link = record_link(api, alice, record["id"]).get_json()
    compared: list[tuple[Any, Any]] = []
    original = services.hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        compared.append((a, b))
        return original(a, b)

    monkeypatch.setattr(services.hmac, "compare_digest", spy)
    assert api.client.get(f"/api/shared/{secret_of(link)}").status_code == 200
    assert compared == [(services.digest(secret_of(link)),) * 2]
    with api.app.app_context():
        stored = db.session.scalars(db.select(services.ShareLink.secret_hash)).all()
    assert stored == [services.digest(secret_of(link))]  # only the hash is kept


def test_failed_lookups_are_throttled_per_address(
    api: Api, alice: Account, stack_config: dict[str, Any]
) -> None:
    record = api.create(alice)
    link = record_link(api, alice, record["id"]).get_json()
    app = create_app(
        {**stack_config, "RATELIMIT_ENABLED": True, "RATELIMIT_SHARE_LINK_FAILURES": "5/minute"}
    )
    client = app.test_client()
    good = f"/api/shared/{secret_of(link)}"
    # A holder's own requests never count.
    assert {client.get(good).status_code for _ in range(8)} == {200}
    guesses = [client.get(f"/api/shared/{n:043d}").status_code for n in range(8)]
    assert guesses == [404] * 5 + [429] * 3
    refused = client.get(good)
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) > 0
    assert refused.headers["Referrer-Policy"] == "no-referrer"
    other = client.get(good, environ_base={"REMOTE_ADDR": "192.0.2.7"})
    assert other.status_code == 200
    with app.app_context():
        db.engine.dispose()


def test_an_error_log_line_names_the_link_not_its_secret(
    api: Api, alice: Account, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = api.create(alice)
    link = record_link(api, alice, record["id"]).get_json()
    storage = api.app.extensions["storage"]

    def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise StorageUnavailable("no route to host")

    monkeypatch.setattr(storage, "open", unreachable)
    with caplog.at_level(logging.DEBUG):
        response = api.client.get(f"/api/shared/{secret_of(link)}/files/{record['id']}/download")
    assert response.status_code == 503
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(f"/api/shared/link:{link['id']}/files/" in line for line in errors)
    assert secret_of(link) not in "\n".join(JSONFormatter().format(r) for r in caplog.records)


def test_no_shape_of_a_secret_path_reaches_a_log_line(
    api: Api, alice: Account, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 36 finding 4: repeated slashes, dot segments, the prefix's case, a secret with
    something around it, a Host label too long for IDNA: no log line shows the secret."""
    record = api.create(alice, "a.txt", b"hello\n")
    link = record_link(api, alice, record["id"]).get_json()
    secret = secret_of(link)
    shapes = [
        f"/api/shared//{secret}",
        f"/api//shared/{secret}",
        f"//api/shared/{secret}/files.zip",
        f"/S/{secret}",
        f"/API/Shared/{secret}",
        f"/api/./shared/{secret}",
        f"/api/x/../shared/{secret}",
        f"/s/./{secret}",
        f"/s/x{secret}y",
        f"/records/{secret}",
        f"/api/files/{secret}.txt",
    ]
    raw = FlaskClient(api.app)  # no OpenAPI check: most of these shapes are not the API's
    api.app.config["PROPAGATE_EXCEPTIONS"] = False  # errors are logged, as in production
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        statuses = [raw.get(path, buffered=True).status_code for path in shapes]
        for path in (f"/s/{secret}", f"/api/shared/{secret}", f"/S/{secret}"):
            answer = raw.get(path, headers={"Host": "a" * 64 + ".example"}, buffered=True)
            statuses.append(answer.status_code)
    formatter = JSONFormatter()
    lines = [formatter.format(r) for r in caplog.records]
    paths = [json.loads(line)["path"] for line in lines if '"logger": "app.access"' in line]
    assert len(paths) == len(shapes) + 3, "one access line a request"
    assert "/api//shared/link:unknown" in paths and "/S/link:unknown" in paths
    assert secret not in "\n".join(lines) + caplog.text
    assert secret[5:-5] not in "\n".join(lines) + caplog.text
