"""Readers first (app/fairness.py): heavy requests beyond their share are refused at once with
503 and Retry-After, while the readers' answers go on."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from flask import Flask

from app.config import ConfigError
from tests.support.api import Api

OAI = "/oai?verb=Identify"


@contextmanager
def held(app: Flask, endpoint: str, path: str, address: str = "192.0.2.1") -> Iterator[None]:
    """A request to ``path`` from ``address`` that is inside its view until the block ends."""
    entered, release = threading.Event(), threading.Event()
    view = app.view_functions[endpoint]

    def holding(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        release.wait(10)
        return view(*args, **kwargs)

    app.view_functions[endpoint] = holding
    answers: list[int] = []
    client = app.test_client()
    environ = {"REMOTE_ADDR": address}
    thread = threading.Thread(
        target=lambda: answers.append(client.get(path, environ_base=environ).status_code)
    )
    thread.start()
    try:
        assert entered.wait(10)
        app.view_functions[endpoint] = view
        yield
    finally:
        release.set()
        thread.join(10)
    assert answers == [200]


@pytest.fixture
def make_app(make_sqlite_app: Callable[..., Flask]) -> Callable[..., tuple[Flask, str]]:
    def make(**config: Any) -> tuple[Flask, str]:
        app = make_sqlite_app(**config)
        api = Api(app, app.test_client())
        return app, api.create(api.account())["id"]

    return make


def get(app: Flask, path: str, address: str = "198.51.100.7") -> Any:
    return app.test_client().get(path, environ_base={"REMOTE_ADDR": address})


def test_a_held_heavy_request_refuses_the_next_while_readers_are_answered(make_app):
    app, record_id = make_app(HEAVY_REQUESTS=1)
    with held(app, "oai.endpoint", OAI):
        refused = get(app, OAI)
        assert refused.status_code == 503
        assert refused.headers["Retry-After"] == "2"
        assert "Try again later" in refused.get_json()["message"]
        assert get(app, "/api/public/files?page=1").status_code == 503
        assert get(app, f"/records/{record_id}").status_code == 200
        assert get(app, f"/api/public/files/{record_id}").status_code == 200
    # The slot is back once the held request has ended.
    assert get(app, OAI).status_code == 200


def test_one_client_holds_at_most_half_of_the_heavy_slots(make_app):
    app, _ = make_app(HEAVY_REQUESTS=2)
    with held(app, "public.list_released", "/api/public/files", address="192.0.2.1"):
        assert get(app, OAI, address="192.0.2.1").status_code == 503
        assert get(app, OAI, address="198.51.100.7").status_code == 200


def test_by_default_a_quarter_of_the_threads_are_for_heavy_requests(make_app):
    app, _ = make_app(SERVER_THREADS=4)
    with held(app, "public.list_released", "/api/public/files"):
        assert get(app, "/search?q=Bericht").status_code == 503
    assert get(app, "/search?q=Bericht").status_code == 200


def test_a_negative_share_is_refused_at_start(make_sqlite_app):
    with pytest.raises(ConfigError, match="HEAVY_REQUESTS"):
        make_sqlite_app(HEAVY_REQUESTS=-1)
