"""A normal user cannot grow the links and the trail without bound (issue 36, finding 6):
creating links is rate-limited per user, and every list a user can grow comes in pages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import func, select

from app import create_app
from app.extensions import db
from app.models import AuditEntry, ShareLink
from tests.links.test_links import kit, record_link
from tests.support.api import Account, Api

PER_PAGE = 3


@pytest.fixture
def app(stack_config: dict[str, Any]) -> Iterator[Flask]:
    app = create_app({**stack_config, "PAGE_SIZE": PER_PAGE})
    yield app
    with app.app_context():
        db.engine.dispose()


def _count(app: Flask, model: Any) -> int:
    with app.app_context():
        n = db.session.scalar(select(func.count()).select_from(model))
        db.session.remove()
        return n or 0


def test_link_creation_is_rate_limited_per_user(
    api: Api, alice: Account, bob: Account, stack_config: dict[str, Any]
) -> None:
    app = create_app({**stack_config, "RATELIMIT_ENABLED": True, "RATELIMIT_LINKS": "3/minute"})
    limited = Api(app, app.test_client())
    record = limited.create(alice)
    theirs = limited.create(bob)
    made = [record_link(limited, alice, record["id"]).status_code for _ in range(2)]
    made.append(kit(limited, alice, "presse/2026").status_code)
    assert made == [201, 201, 201]
    links, trail = _count(app, ShareLink), _count(app, AuditEntry)
    for refused in (record_link(limited, alice, record["id"]), kit(limited, alice, "presse")):
        assert refused.status_code == 429
        assert int(refused.headers["Retry-After"]) > 0
        assert refused.get_json()["message"]
    # Refused: no link and no audit entry.
    assert (_count(app, ShareLink), _count(app, AuditEntry)) == (links, trail)
    assert record_link(limited, bob, theirs["id"]).status_code == 201
    with app.app_context():
        db.engine.dispose()


def test_by_default_thirty_links_a_minute(
    api: Api, alice: Account, stack_config: dict[str, Any]
) -> None:
    """The issue's 1,000 links in 10 s: the default (`30 per minute;300 per day`) stops them
    at the 31st."""
    settings = {key: value for key, value in stack_config.items() if key != "RATELIMIT_LINKS"}
    app = create_app({**settings, "RATELIMIT_ENABLED": True})
    limited = Api(app, app.test_client())
    record = limited.create(alice)
    statuses = [record_link(limited, alice, record["id"]).status_code for _ in range(31)]
    assert statuses == [201] * 30 + [429]
    with app.app_context():
        db.engine.dispose()


def _pages(api: Api, account: Account, url: str) -> list[dict[str, Any]]:
    first = api.get(url, account)
    assert first.status_code == 200, first.get_json()
    body = first.get_json()
    pages = [body]
    for n in range(2, body["last_page"] + 1):
        response = api.get(f"{url}?page={n}", account)
        assert response.status_code == 200
        pages.append(response.get_json())
    return pages


def test_the_link_lists_come_in_pages(api: Api, alice: Account) -> None:
    record = api.create(alice)
    made = [record_link(api, alice, record["id"]).get_json()["id"] for _ in range(5)]
    made += [kit(api, alice, f"presse/{n}").get_json()["id"] for n in range(2)]
    for url, expected in (
        ("/api/links", made),
        (f"/api/files/{record['id']}/links", made[:5]),
    ):
        pages = _pages(api, alice, url)
        first = pages[0]
        assert (first["total"], first["per_page"], first["current_page"]) == (
            len(expected),
            PER_PAGE,
            1,
        )
        assert first["last_page"] == -(-len(expected) // PER_PAGE)
        assert all(len(page["data"]) <= PER_PAGE for page in pages)
        listed = [link["id"] for page in pages for link in page["data"]]
        assert listed == list(reversed(expected))  # newest first, each once
        assert first["next_page_url"].endswith("page=2")
        assert pages[-1]["next_page_url"] is None
    bad = api.get("/api/links?page=0", alice)
    assert bad.status_code == 422
    assert "page" in bad.get_json()["errors"]


def test_a_records_history_comes_in_pages(api: Api, alice: Account) -> None:
    record = api.create(alice)
    for n in range(6):
        assert api.patch(record["id"], alice, {"titel": f"Titel {n}"}).status_code == 200
    url = f"/api/files/{record['id']}/history"
    seen: list[int] = []
    answer = api.get(url, alice).get_json()
    while True:
        assert len(answer["data"]) <= PER_PAGE
        seen += [entry["seq"] for entry in answer["data"]]
        if answer["next_cursor"] is None:
            break
        answer = api.get(url, alice, query_string={"cursor": answer["next_cursor"]}).get_json()
    assert len(seen) == 7 and seen == sorted(seen)  # the creation and six changes, oldest first
    assert api.get(url, alice, query_string={"cursor": "x"}).status_code == 422
