"""Apps whose statistics run on a clock the test moves; tests flush them by hand."""

from __future__ import annotations

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
