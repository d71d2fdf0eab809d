"""The documentation page: Swagger UI served by the service itself, rendered in a real browser.

The browser test drives Debian's Chromium (`apt-get install chromium`) with Playwright against a
waitress server on a free loopback port. Without Chromium it is skipped, unless
`REQUIRE_BROWSER=1` turns the skip into a failure.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from flask import Flask
from waitress.server import create_server

from app.docs.assets import ASSET_TYPES, SWAGGER_UI_VERSION

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = Path(__file__).resolve().parents[2] / "test-artifacts" / "docs-page.png"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@pytest.fixture
def docs_app(make_sqlite_app) -> Flask:
    """An app for reading the document and its page."""
    return make_sqlite_app()


def test_the_page_loads_only_local_assets(docs_app: Flask):
    client = docs_app.test_client()
    page = client.get("/api/docs")
    assert page.status_code == 200 and page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    assert not re.search(r"(?:src|href)=\"(?:https?:)?//", html)
    references = re.findall(r"(?:src|href|data-spec-url)=\"([^\"]+)\"", html)
    assert references and all(ref.startswith("/api/") for ref in references)
    policy = page.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "connect-src 'self'" in policy
    assert page.headers["X-Content-Type-Options"] == "nosniff"

    for name, mimetype in ASSET_TYPES.items():
        url = next((ref for ref in references if f"/assets/{name}?" in ref), None)
        response = client.get(url or f"/api/docs/assets/{name}", buffered=True)
        assert response.status_code == 200, name
        assert response.mimetype == mimetype and response.content_length, name
        if mimetype.startswith("text/"):
            assert response.mimetype_params == {"charset": "utf-8"}, name
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        cache = response.cache_control
        assert cache.public and cache.max_age == 86400, name
        revalidated = client.get(
            url or f"/api/docs/assets/{name}",
            headers={"If-None-Match": response.headers["ETag"]},
            buffered=True,
        )
        assert revalidated.status_code == 304, name
    assert {"swagger-ui-bundle.js", "swagger-ui.css", "docs.js"} <= {
        ref.split("/assets/")[-1].split("?")[0] for ref in references
    }
    assert f"v={SWAGGER_UI_VERSION}" in html

    missing = client.get("/api/docs/assets/index.html")
    assert missing.status_code == 404 and missing.get_json() == {"message": "Not found."}


@pytest.fixture
def live_server(docs_app: Flask) -> Iterator[str]:
    server = create_server(docs_app, host="127.0.0.1", port=0, threads=2)
    thread = threading.Thread(target=server.run, name="waitress", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.effective_port}"
    finally:
        # Closed by the server's own loop: closing its sockets from this thread could pull
        # them from under a poll that is running (EBADF in the server thread).
        server.trigger.pull_trigger(server.close)
        thread.join(timeout=10)
        assert not thread.is_alive()


def _browser_or_skip() -> None:
    reason = None
    if not Path(CHROMIUM).exists():
        reason = f"{CHROMIUM} is missing (apt-get install chromium chromium-driver)"
    elif not _playwright_installed():
        reason = "Playwright for Python is not installed"
    if reason:
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but {reason}", pytrace=False)
        pytest.skip(reason)


def _playwright_installed() -> bool:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return True


def test_swagger_ui_renders_every_operation_offline(live_server: str):
    _browser_or_skip()
    from playwright.sync_api import Route, sync_playwright

    requested: list[str] = []
    refused: list[str] = []
    problems: list[str] = []

    def only_loopback(route: Route) -> None:
        url = route.request.url
        requested.append(url)
        if urlsplit(url).hostname in LOOPBACK:
            route.continue_()
        else:
            refused.append(url)
            route.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.route("**/*", only_loopback)
            page = context.new_page()
            page.on(
                "console",
                lambda message: problems.append(message.text) if message.type == "error" else None,
            )
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.goto(f"{live_server}/api/docs")
            page.wait_for_selector(".opblock-summary", timeout=30_000)
            operations = page.eval_on_selector_all(
                ".opblock-summary",
                """blocks => blocks.map(block =>
                    block.querySelector('.opblock-summary-method').textContent.trim() + ' ' +
                    block.querySelector('.opblock-summary-path').getAttribute('data-path'))""",
            )
            title = page.text_content(".information-container .title")
            SCREENSHOT.parent.mkdir(exist_ok=True)
            page.screenshot(path=str(SCREENSHOT), full_page=True)
        finally:
            browser.close()

    for expected in (
        "POST /api/tokens",
        "DELETE /api/tokens/current",
        "POST /api/files",
        "GET /api/files",
        "GET /api/files/{id}",
        "PATCH /api/files/{id}",
        "DELETE /api/files/{id}",
        "GET /api/files/{id}/download",
        "POST /api/files/{id}/content",
        "GET /api/public/files",
        "GET /api/public/files/{id}",
        "GET /api/public/files/{id}/download",
    ):
        assert expected in operations
    assert title and "File repository API" in title
    assert f"{live_server}/api/openapi.json" in requested
    assert refused == [], "requests left the machine"
    assert all(urlsplit(url).hostname in LOOPBACK for url in requested)
    assert problems == []
    assert SCREENSHOT.stat().st_size > 10_000
