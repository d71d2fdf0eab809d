from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from tests.support.api import Api


@pytest.fixture
def api(app: Flask, client: Any) -> Api:
    return Api(app, client)
