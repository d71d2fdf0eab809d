from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from tests.conftest import migrate_database
from tests.support.api import Account, Api
from tests.support.replicas import Replicas


@pytest.fixture
def api(app: Flask, client: Any) -> Api:
    return Api(app, client)


@pytest.fixture
def alice(api: Api) -> Account:
    return api.account("alice@example.org")


@pytest.fixture
def bob(api: Api) -> Account:
    return api.account("bob@example.org")


@pytest.fixture
def admin(api: Api) -> Account:
    return api.account("admin@example.org", admin=True)


@pytest.fixture
def replicas(make_postgres_database: Any, tmp_path: Path) -> Iterator[Replicas]:
    """Two apps on one fresh, migrated PostgreSQL database (two server processes)."""
    url = make_postgres_database()
    migrate_database(url, tmp_path)
    replicas = Replicas(url, tmp_path)
    yield replicas
    replicas.close()
