"""A record's page is rendered when the record is written and kept beside its citation; a view
fills in the reader's address, the reach and a CSV's rows, and renders the page itself where
the kept one is missing or no longer fits. The reader gets the same page either way."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select, update

from app.extensions import db
from app.files import access
from app.models import FileRecord, RecordCitation
from app.pages import kept
from app.pages.records import BASE, LANGUAGE_LINK, REACH, SCRIPT, TABLE
from app.storage import StorageUnavailable
from tests.conftest import STACKS
from tests.support import samples
from tests.support.api import Account, Api

LANGUAGES = ({}, {"Accept-Language": "en"})


def kept_row(api: Api, record_id: str) -> RecordCitation:
    with api.app.app_context():
        row = db.session.scalars(
            select(RecordCitation).where(RecordCitation.record_id == uuid.UUID(record_id))
        ).one()
        db.session.expunge_all()
        return row


def set_kept(api: Api, record_id: str, **values: Any) -> None:
    with api.app.app_context():
        db.session.execute(
            update(RecordCitation)
            .where(RecordCitation.record_id == uuid.UUID(record_id))
            .values(**values)
        )
        db.session.commit()


def pages(api: Api, record_id: str, **kwargs: Any) -> list[tuple[int, bytes, str, str]]:
    """The page in both languages as a reader gets it: status, body, ETag, Link."""
    answers = []
    for headers in LANGUAGES:
        response = api.client.get(f"/records/{record_id}", headers=headers, **kwargs)
        answers.append(
            (
                response.status_code,
                response.get_data(),
                response.headers.get("ETag", ""),
                response.headers.get("Link", ""),
            )
        )
    return answers


def rendered_now(api: Api, record_id: str, **kwargs: Any) -> list[tuple[int, bytes, str, str]]:
    """The same, with the kept page set aside: the page renders itself."""
    row = kept_row(api, record_id)
    set_kept(api, record_id, page_key=None)
    try:
        return pages(api, record_id, **kwargs)
    finally:
        set_kept(api, record_id, page_key=row.page_key)


@pytest.fixture
def kinds(api: Api, alice: Account) -> list[dict[str, Any]]:
    later = (datetime.now(UTC).date() + timedelta(days=30)).isoformat()
    common = {
        "autoren": "Muster, Erika; O'Brien, Seán",
        "sachschlagwoerter": "Arbeit; Löhne",
        "org_themen": "Markt",
        "beschreibung": 'Zeilen & "Zitate" <b>fett</b>',
        "path": "presse/2026_mehr",
    }
    return [
        api.create(alice, "bericht.pdf", titel="Löhne & <Preise>", **common),
        api.create(alice, "daten.csv", samples.csv_bytes(), titel="Daten", **common),
        api.create(alice, "folge.mp3", samples.mp3_bytes(), titel="Folge", **common),
        api.create(alice, "film.mp4", samples.mp4_bytes(), **common),
        api.create(alice, "bild.png", samples.png_bytes(), titel="Bild", **common),
        api.create(alice, "gesperrt.pdf", titel="Gesperrt", sperrfrist=later, **common),
    ]


def test_every_kind_of_page_is_kept_and_shown_as_it_would_render(api: Api, kinds):
    for record in kinds:
        row = kept_row(api, record["id"])
        assert row.page_key and BASE in row.page_de and BASE in row.page_en
        assert row.page_de.startswith("<!doctype html>") and SCRIPT in row.page_de
        assert f"{LANGUAGE_LINK}en" in row.page_de and f"{LANGUAGE_LINK}de" in row.page_en
        assert REACH in row.page_de and TABLE not in row.page_de
        # A CSV's rows are read once, when its page is kept.
        assert ("<table>" in row.page_de) == record["original_name"].endswith(".csv")
        kept_pages = pages(api, record["id"])
        assert [status for status, *_ in kept_pages] == [200, 200]
        assert kept_pages == rendered_now(api, record["id"])
        # ... under another address too (links follow the Host with no address set).
        other = {"base_url": "http://repository.example:8080"}
        assert pages(api, record["id"], **other) == rendered_now(api, record["id"], **other)
    csv_page = pages(api, kinds[1]["id"])[0][1]
    assert b"<table>" in csv_page and b"<caption>" in csv_page


@pytest.mark.parametrize("stack_config", [STACKS[1]], indirect=True)  # SQLite has no TOAST
def test_kept_pages_stay_in_their_row_on_postgresql(api: Api, kinds):
    """A row of both pages is read from its own table page, not from the TOAST table, which
    cost a kept page's read two or three more page reads (migration 0020)."""
    with api.app.app_context():
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            # Earlier tests' rows were deleted, not truncated: vacuum lets their TOAST pages
            # go, so what is left there is this test's.
            conn.exec_driver_sql("VACUUM record_citations")
            options, toasted, kept_rows = conn.execute(
                sa.text(
                    "SELECT c.reloptions, pg_relation_size(c.reltoastrelid),"
                    " (SELECT count(*) FROM record_citations WHERE page_key IS NOT NULL)"
                    " FROM pg_class c WHERE c.relname = 'record_citations'"
                )
            ).one()
    assert "toast_tuple_target=8160" in options
    assert kept_rows == len(kinds) and toasted == 0


def test_a_csv_unreadable_when_kept_is_read_when_viewed(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    def unreachable(*args: Any) -> Any:
        raise StorageUnavailable("storage down while the record was written")

    monkeypatch.setattr(kept, "read_csv_rows", unreachable)
    record = api.create(alice, "daten.csv", samples.csv_bytes(), titel="Daten")
    monkeypatch.undo()
    row = kept_row(api, record["id"])
    assert TABLE in row.page_de and "<table>" not in row.page_de
    viewed = pages(api, record["id"])
    assert b"<table>" in viewed[0][1]  # read now and put in where it was left out
    assert viewed == rendered_now(api, record["id"])
    # Its object missing when kept: no table, as a page rendered then would have shown.
    storage = api.app.extensions["storage"]
    storage.delete(api.row(record["id"]).stored_path)
    api.set_columns(record["id"], titel="Ohne Inhalt")
    row = kept_row(api, record["id"])
    assert TABLE not in row.page_de and "<table>" not in row.page_de
    assert pages(api, record["id"]) == rendered_now(api, record["id"])


def test_the_page_shows_what_was_kept(api: Api, alice: Account):
    record = api.create(alice, "bericht.pdf", titel="Echt")
    row = kept_row(api, record["id"])
    set_kept(api, record["id"], page_de=row.page_de.replace("Echt", "Gefälscht"))
    german, english = pages(api, record["id"])
    assert b"<h1>Gef\xc3\xa4lscht</h1>" in german[1]  # the kept text, read as it is
    assert b"<h1>Echt</h1>" in english[1]


def test_a_kept_page_that_no_longer_fits_is_rendered_anew(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    until = datetime.now(UTC).date() + timedelta(days=3)
    record = api.create(alice, "bericht.pdf", titel="Alt", sperrfrist=until.isoformat())
    forged = kept_row(api, record["id"]).page_de.replace("Alt", "Veraltet")
    set_kept(api, record["id"], page_de=forged)
    # Changed by SQL (no flush event renders it again): the key no longer fits.
    with api.app.app_context():
        db.session.execute(
            update(FileRecord)
            .where(FileRecord.id == uuid.UUID(record["id"]))
            .values(titel="Neu per SQL")
        )
        db.session.commit()
    assert b"<h1>Neu per SQL</h1>" in pages(api, record["id"])[0][1]
    # The embargo ends after the write: the kept page (under embargo) no longer fits.
    set_kept(api, record["id"], page_key=None)
    api.set_columns(record["id"], titel="Alt")  # kept again, under embargo
    assert b'class="embargo"' in pages(api, record["id"])[0][1]
    monkeypatch.setattr(access, "today", lambda: until + timedelta(days=1))
    german = pages(api, record["id"])[0][1]
    assert b'class="embargo"' not in german and b'class="download"' in german
    assert pages(api, record["id"]) == rendered_now(api, record["id"])


def test_a_kept_page_follows_the_oai_namespace(api: Api, alice: Account):
    record = api.create(alice, "bericht.pdf", titel="Bericht")
    api.app.config["OAI_NAMESPACE"] = "repository.example"
    page = pages(api, record["id"])
    assert f"oai%3Arepository.example%3A{record['id']}".encode() in page[0][1]
    assert page == rendered_now(api, record["id"])


def test_an_address_that_would_read_differently_renders_the_page_itself():
    key = "k" * 32
    assert kept.fits("text", key, key, "https://repository.example/prefix", "/prefix")
    for address in ('http://a.example/"x', "http://a.example/<x>", "http://a.example/a&b"):
        assert not kept.fits("text", key, key, address, "")
    assert not kept.fits("text", key, key, "http://a.example/a b", "/a b")  # url_for quotes it
    assert not kept.fits("text", None, None, "http://a.example", "")  # nothing kept
    assert not kept.fits("", key, key, "http://a.example", "")
    assert not kept.fits("text", key, "other", "http://a.example", "")


@given(
    parts=st.lists(st.text(alphabet=st.sampled_from("aé–\ue0f1\ue0f2\ue0f4")), max_size=8),
    value=st.text(max_size=5),
)
def test_a_placeholder_is_put_in_as_replace_would(parts: list[str], value: str):
    text = "".join(parts)
    for placeholder in (BASE, REACH, SCRIPT):
        assert kept._put(text, placeholder, value) == text.replace(placeholder, value)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(record_id=st.uuids(), path=st.one_of(st.none(), st.text()))
def test_a_pages_addresses_are_written_as_urlencode_writes_them(app, record_id, path):
    with app.app_context():
        urls = kept.page_urls(record_id, path, "https://r.example")
        identifier = f"oai:{app.config['OAI_NAMESPACE']}:{record_id}"
    oai = [("verb", "GetRecord"), ("metadataPrefix", "oai_dc"), ("identifier", identifier)]
    assert urls.oai_record == f"https://r.example/oai?{urlencode(oai)}"
    feed = "https://r.example/api/public/feed.atom"
    assert urls.folder_feed == (f"{feed}?{urlencode([('path', path)])}" if path else feed)
    assert urls.page == f"https://r.example/records/{record_id}"


def test_a_kept_page_follows_the_mount_point_and_keeps_the_request_in_its_language_link(
    api: Api, alice: Account
):
    record = api.create(alice, "bericht.pdf", titel="Eingebunden")
    mounted = {"base_url": "http://localhost/repo/"}
    assert pages(api, record["id"], **mounted) == rendered_now(api, record["id"], **mounted)
    assert b'href="/repo/static/pages/pages.css"' in pages(api, record["id"], **mounted)[0][1]
    asked = {"query_string": {"utm_source": 'news"letter&x=<1>'}}
    kept_pages = pages(api, record["id"], **asked)
    assert kept_pages == rendered_now(api, record["id"], **asked)
    assert b'href="?utm_source=news%22letter%26x%3D%3C1%3E&amp;lang=en"' in kept_pages[0][1]


PLACEHOLDERS = st.sampled_from(["\ue0f0", BASE, REACH, TABLE, SCRIPT, LANGUAGE_LINK, "\ue0ff"])
TEXT = st.text(
    st.one_of(
        st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\x00"),
        PLACEHOLDERS,
    ),
    max_size=40,
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(titel=TEXT, autoren=TEXT, beschreibung=TEXT, sachschlagwoerter=TEXT, org_themen=TEXT)
def test_any_metadata_gives_the_same_page_kept_or_rendered_now(
    api: Api, alice: Account, titel, autoren, beschreibung, sachschlagwoerter, org_themen
):
    values = {
        "titel": titel,
        "autoren": autoren,
        "beschreibung": beschreibung,
        "sachschlagwoerter": sachschlagwoerter,
        "org_themen": org_themen,
    }
    record = api.create(alice, "bericht.pdf")
    # Written as the ORM writes (the flush renders and keeps the page), whatever the API's
    # own rules would refuse: placeholders, controls, any Unicode.
    api.set_columns(record["id"], **values)
    row = kept_row(api, record["id"])
    assert row.page_key is not None
    for text in (row.page_de, row.page_en):
        assert text.count(SCRIPT) == 3 and text.count(REACH) == 1
    assert pages(api, record["id"]) == rendered_now(api, record["id"])


def test_the_operator_keeps_the_pages_of_records_written_by_hand(api: Api, runner, alice):
    record = api.create(alice, "bericht.pdf", titel="Eins")
    before = pages(api, record["id"])
    set_kept(api, record["id"], page_key=None, page_de=None, page_en=None)
    result = runner.invoke(args=["pages", "citations"])
    assert result.output == "citations and pages: 1 records checked, 1 kept anew\n"
    assert kept_row(api, record["id"]).page_key is not None
    assert pages(api, record["id"]) == before
    assert runner.invoke(args=["pages", "citations"]).output.endswith(", 0 kept anew\n")


def test_a_page_that_cannot_be_kept_does_not_stop_the_write(
    api: Api, alice: Account, monkeypatch: pytest.MonkeyPatch
):
    def broken(*args: Any) -> Any:
        raise RuntimeError("no page today")

    monkeypatch.setattr(kept, "kept_pages", broken)
    record = api.create(alice, "bericht.pdf", titel="Trotzdem")
    monkeypatch.undo()
    row = kept_row(api, record["id"])
    assert row.page_key is None and row.key  # the citation is kept, the page is not
    assert b"<h1>Trotzdem</h1>" in pages(api, record["id"])[0][1]


def test_dates_in_the_kept_page_follow_its_language(api: Api, alice: Account):
    record = api.create(alice, "bericht.pdf", titel="Datum")
    day = date.fromisoformat(record["created_at"][:10])
    german, english = pages(api, record["id"])
    assert f"{day.day}. ".encode() in german[1]
    assert f" {day.day}, {day.year}".encode() in english[1]
