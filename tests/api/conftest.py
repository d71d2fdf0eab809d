from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from tests.support.api import Account, Api


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
