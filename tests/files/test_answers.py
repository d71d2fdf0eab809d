"""Public answers kept whole (app/files/answers.py) are right at the instant things change:
an embargo that ends between two requests shows in the second, a withdrawal disappears at
once, and a change written by another connection (another process) is seen by the next
request."""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import create_engine, event, text

from app.extensions import db
from app.files import access
from app.files.answers import AnswerCache
from tests.support import samples
from tests.support.api import Account, Api

LIST = "/api/public/files"
SEARCH = "/search?q=Bericht"
FRONT = "/"
ATOM = "/api/public/feed.atom"
PODCAST = "/api/public/podcast.rss"
OAI = "/oai?verb=ListRecords&metadataPrefix=oai_dc"
HEAVY = (LIST, SEARCH, FRONT, ATOM, PODCAST, OAI)
#: Those that show only what the public may download now: an embargoed record is not there.
DOWNLOADABLE = (FRONT, ATOM, PODCAST)


def _body(api: Api, url: str) -> str:
    response = api.client.get(url)
    assert response.status_code == 200, url
    return response.text


def _record_statements(app: Any) -> list[str]:
    """The statements that read records (not the state read of the cache) from now on."""
    seen: list[str] = []
    with app.app_context():
        engine = db.engine

    def note(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "file_records" in statement:
            seen.append(statement)

    event.listen(engine, "before_cursor_execute", note)
    return seen


@pytest.fixture
def two(api: Api, alice: Account) -> tuple[dict[str, Any], dict[str, Any]]:
    """A released podcast episode, and one under embargo until tomorrow."""
    tomorrow = datetime.now(UTC).date() + timedelta(days=1)
    free = api.create(alice, "frei.mp3", samples.mp3_bytes(), titel="Bericht frei")
    later = api.create(
        alice, "spaeter.mp3", samples.mp3_bytes(), titel="Bericht später", sperrfrist=str(tomorrow)
    )
    return free, later


def test_a_second_request_is_answered_without_reading_records(api: Api, app: Any, two):
    first = {url: _body(api, url) for url in HEAVY}
    read = _record_statements(app)
    for url in HEAVY:
        again = _body(api, url)
        if url == OAI:  # made afresh around the kept records
            again = re.sub(r"<responseDate>[^<]*", "", again)
            first[url] = re.sub(r"<responseDate>[^<]*", "", first[url])
        assert again == first[url], url
    assert read == []


def test_an_embargo_that_ends_between_two_requests_shows_in_the_second(
    api: Api, two, monkeypatch: pytest.MonkeyPatch
):
    free, later = two
    until = later["sperrfrist"]
    for _ in range(2):  # the second answer is the kept one
        for url in DOWNLOADABLE:
            body = _body(api, url)
            assert free["id"] in body and later["id"] not in body, url
        assert "embargo-note" in _body(api, SEARCH)
        assert f"Embargoed until {until}." in _body(api, OAI)
    tomorrow = datetime.now(UTC).date() + timedelta(days=1)
    monkeypatch.setattr(access, "today", lambda: tomorrow)
    for url in DOWNLOADABLE:
        body = _body(api, url)
        assert free["id"] in body and later["id"] in body, url
    assert "embargo-note" not in _body(api, SEARCH)
    assert "Embargoed until" not in _body(api, OAI)


def test_a_withdrawal_disappears_at_once(api: Api, alice: Account, two):
    free, _later = two
    for _ in range(2):
        for url in HEAVY:
            assert free["id"] in _body(api, url), url
    assert api.patch(free["id"], alice, {"freigabe": "0"}).status_code == 200
    for url in (LIST, SEARCH, FRONT, ATOM, PODCAST):
        assert free["id"] not in _body(api, url), url
    assert re.search(rf'<header status="deleted"><identifier>[^<]*{free["id"]}<', _body(api, OAI))


def test_a_release_shows_at_once(api: Api, alice: Account, two):
    for url in HEAVY:
        _body(api, url)
    new = api.create(alice, "neu.mp3", samples.mp3_bytes(), titel="Bericht neu", freigabe="0")
    for url in HEAVY:
        assert new["id"] not in _body(api, url), url
    assert api.patch(new["id"], alice, {"freigabe": "1"}).status_code == 200
    for url in HEAVY:
        assert new["id"] in _body(api, url), url


def test_a_change_committed_elsewhere_is_seen_by_the_next_request(api: Api, app: Any, two):
    free, _later = two
    for _ in range(2):
        for url in HEAVY:
            assert "Umbenannt" not in _body(api, url), url
    # Another process's write: a connection of its own, past the app's session.
    other = create_engine(app.config["SQLALCHEMY_DATABASE_URI"])
    try:
        with other.begin() as connection:
            connection.execute(
                text("UPDATE file_records SET titel = :titel WHERE id = :id"),
                {"titel": "Bericht Umbenannt", "id": free["id"].replace("-", "")}
                if other.dialect.name == "sqlite"
                else {"titel": "Bericht Umbenannt", "id": free["id"]},
            )
    finally:
        other.dispose()
    for url in HEAVY:
        assert "Umbenannt" in _body(api, url), url


def test_one_request_makes_a_missing_answer_while_the_others_wait_for_it():
    cache = AnswerCache()
    assert cache.get_or_claim("page", 1) == (None, True)  # this one makes it
    got: list[Any] = []
    waiting = threading.Thread(target=lambda: got.append(cache.get_or_claim("page", 1)))
    waiting.start()
    waiting.join(0.2)
    assert waiting.is_alive() and got == []  # waits for it
    assert cache.get_or_claim("page", 2) == (None, True)  # another state is another answer
    cache.put("page", 1, "made", 4)
    waiting.join(5)
    assert got == [("made", False)]
    # Given up (the maker failed): the next one makes it.
    cache.release("page", 2)
    assert cache.get_or_claim("page", 2) == (None, True)
