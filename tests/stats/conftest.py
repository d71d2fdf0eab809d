"""Apps whose statistics run on a clock the test moves; tests flush them by hand."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from flask import Flask

from app import create_app
from app.extensions import db

START = datetime(2026, 11, 26, 10, 0, tzinfo=UTC).timestamp()


class Clock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def app(stack_config: dict[str, Any], clock: Clock) -> Iterator[Flask]:
    app = create_app(
        {
            **stack_config,
            "STATS_CLOCK": clock,
        }
    )
    yield app
    with app.app_context():
        db.engine.dispose()


@pytest.fixture
def redis_url() -> str:
    """Redis on 127.0.0.1:6379, as tests/test_replicas.py finds it (`REQUIRE_REDIS=1`)."""
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=1).close()
    except OSError:
        reason = "Redis is not reachable at 127.0.0.1:6379"
        if os.environ.get("REQUIRE_REDIS") == "1":
            pytest.fail(f"REQUIRE_REDIS=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return "redis://127.0.0.1:6379/0"
