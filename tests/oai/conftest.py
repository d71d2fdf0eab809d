"""The OAI-PMH tests' real HTTP server, for harvesters that speak HTTP (Sickle)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from flask import Flask
from werkzeug.serving import make_server


@pytest.fixture
def server(app: Flask) -> Iterator[str]:
    """The app behind a real HTTP server in this process (same database as the test)."""
    httpd = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}/oai"
    httpd.shutdown()
    thread.join()
