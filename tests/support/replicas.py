"""Two apps on one PostgreSQL database, standing for two server processes ("replicas"), for
the tests of what each process caches (app/cache.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from flask import Flask

from app import create_app
from app.cache import LISTENER_NAME
from app.extensions import db
from tests.conftest import base_config
from tests.support.api import Api


def wait_for(condition: Callable[[], bool], seconds: float = 2.0) -> float:
    """How long `condition` took to hold; fails after `seconds`."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > seconds:
            pytest.fail(f"still not true after {seconds} s")
        time.sleep(0.005)
    return time.monotonic() - start


class Replicas:
    def __init__(self, url: str, tmp_path: Path) -> None:
        self.url = url
        self.tmp_path = tmp_path
        self.apps: list[Flask] = []
        self.a = self.app()
        self.b = self.app()
        self.api = Api(self.a, self.a.test_client())

    def app(self, **overrides: Any) -> Flask:
        app = create_app(
            base_config(
                SQLALCHEMY_DATABASE_URI=self.url,
                STORAGE_LOCAL_ROOT=str(self.tmp_path / "storage"),
                **overrides,
            )
        )
        self.apps.append(app)
        return app

    def sql(self, *statements: str | tuple[str, tuple[Any, ...]]) -> None:
        """Changes made by hand, outside the app, in one session (each statement commits)."""
        url = sa.make_url(self.url).set(drivername="postgresql").render_as_string(False)
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in statements:
                query, params = statement if isinstance(statement, tuple) else (statement, ())
                conn.execute(query, params)

    def terminate_listeners(self) -> int:
        """Ends the caches' listening connections (as a failover would); how many."""
        url = sa.make_url(self.url).set(drivername="postgresql").render_as_string(False)
        with psycopg.connect(url, autocommit=True) as conn:
            ended = conn.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                "WHERE application_name = %s AND datname = current_database()",
                (LISTENER_NAME,),
            ).fetchall()
        return len(ended)

    def close(self) -> None:
        for app in self.apps:
            with app.app_context():
                db.engine.dispose()
