"""Atom and podcast feeds: parsed back with feedparser, enclosures downloaded, revalidation."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from urllib.parse import urlsplit

import feedparser
import pytest

from app.files import access
from tests.support import samples
from tests.support.api import Account, Api

PUBLIC_CACHE = "public, max-age=0, must-revalidate"


def parse(api: Api, url: str, **params: str):
    response = api.client.get(url, query_string=params)
    assert response.status_code == 200, response.data
    assert response.headers["Cache-Control"] == PUBLIC_CACHE
    return response, feedparser.parse(response.data)


def ids(feed) -> list[str]:
    return [entry.id.removeprefix("urn:uuid:") for entry in feed.entries]


@pytest.fixture
def today():
    return datetime.now(UTC).date()


def test_atom_feed_lists_downloadable_releases_newest_first(api: Api, alice: Account, today):
    old = api.create(alice, "alt.pdf", titel="Alter Bericht", path="reports/2024")
    new = api.create(
        alice, "neu.pdf", titel="Neuer Bericht", path="reports/2025", beschreibung="Zahlen"
    )
    api.create(alice, "intern.pdf", titel="Intern", freigabe="false", path="reports/2025")
    api.create(alice, "spaeter.pdf", titel="Später", sperrfrist=str(today + timedelta(days=1)))
    ended = api.create(alice, "heute.pdf", titel="Heute frei", sperrfrist=str(today))
    api.create(alice, "presse.pdf", titel="Presse", path="presse")
    api.set_columns(old["id"], created_at=datetime(2024, 1, 1, tzinfo=UTC))
    api.set_columns(new["id"], created_at=datetime(2025, 1, 1, tzinfo=UTC))
    api.set_columns(ended["id"], created_at=datetime(2023, 1, 1, tzinfo=UTC))

    response, feed = parse(api, "/api/public/feed.atom", path="reports")
    assert response.mimetype == "application/atom+xml"
    assert feed.version == "atom10" and not feed.bozo
    assert ids(feed) == [new["id"], old["id"]]
    entry = feed.entries[0]
    assert entry.title == "Neuer Bericht" and entry.summary == "Zahlen"
    enclosure = next(link for link in entry.links if link.rel == "enclosure")
    assert enclosure.href == f"http://localhost/api/public/files/{new['id']}/download"
    assert enclosure.type == "application/pdf"
    # The entry links the record's landing page, where people read it.
    (alternate,) = [link for link in entry.links if link.rel == "alternate"]
    assert alternate.href == f"http://localhost/records/{new['id']}"
    assert alternate.type == "text/html"
    assert entry.link == alternate.href
    landing = api.client.get(urlsplit(alternate.href).path)
    assert landing.status_code == 200 and landing.mimetype == "text/html"

    _, everything = parse(api, "/api/public/feed.atom")
    titles = [entry.title for entry in everything.entries]
    # The feed itself links the page where people read its releases: the nearest folder page
    # holding all of them (not the JSON list).
    _, folder = parse(api, "/api/public/feed.atom", path="reports/")
    for parsed, page in ((folder, "/browse/reports"), (feed, "/browse/"), (everything, "/browse/")):
        (link,) = [link for link in parsed.feed.links if link.rel == "alternate"]
        assert (link.href, link.type) == (f"http://localhost{page}", "text/html")
        shown = api.client.get(page)
        assert shown.status_code == 200 and shown.mimetype == "text/html"
    assert 'href="http://localhost/browse/reports/2025"' in api.client.get("/browse/reports").text
    # The embargo that ends today counts as released at the start of today.
    assert titles == ["Presse", "Heute frei", "Neuer Bericht", "Alter Bericht"]
    published = datetime(*everything.entries[titles.index("Heute frei")].published_parsed[:6])
    assert published.replace(tzinfo=UTC) == datetime.combine(today, time(), tzinfo=UTC)


def test_embargoed_file_appears_on_the_day_its_embargo_ends(
    api: Api, alice: Account, today, monkeypatch
):
    record = api.create(alice, "x.mp3", samples.mp3_bytes(), sperrfrist=str(today + timedelta(1)))
    for url in ("/api/public/feed.atom", "/api/public/podcast.rss"):
        assert ids(parse(api, url)[1]) == []
    monkeypatch.setattr(access, "today", lambda: today + timedelta(days=1))
    for url in ("/api/public/feed.atom", "/api/public/podcast.rss"):
        assert ids(parse(api, url)[1]) == [record["id"]]


def test_podcast_feed_has_one_enclosure_per_audio_or_video_file(api: Api, alice: Account):
    audio = samples.mp3_bytes()
    episode = api.create(
        alice, "folge.mp3", audio, titel="Folge 1", autoren="Anna Weber", path="podcasts/a"
    )
    video = api.create(alice, "film.mp4", samples.mp4_bytes(), titel="Film", path="podcasts/a")
    api.create(alice, "skript.pdf", titel="Skript", path="podcasts/a")
    api.create(alice, "geheim.mp3", audio, titel="Geheim", freigabe="0", path="podcasts/a")
    api.create(alice, "andere.mp3", audio, titel="Andere", path="andere")

    response, feed = parse(api, "/api/public/podcast.rss", path="podcasts")
    assert response.mimetype == "application/rss+xml"
    assert feed.version == "rss20" and not feed.bozo
    assert "http://www.itunes.com/dtds/podcast-1.0.dtd" in feed.namespaces.values()
    assert sorted(ids(feed)) == sorted([episode["id"], video["id"]])
    by_title = {entry.title: entry for entry in feed.entries}
    assert by_title["Folge 1"].author == "Anna Weber"
    assert b"<itunes:author>Anna Weber</itunes:author>" in response.data
    for entry, record, data_type in (
        (by_title["Folge 1"], episode, "audio/mpeg"),
        (by_title["Film"], video, "video/mp4"),
    ):
        (enclosure,) = entry.enclosures
        assert enclosure.type == record["mime_type"] == data_type
        # The episode's link is its landing page; the enclosure stays the download.
        assert entry.link == f"http://localhost/records/{record['id']}"
        assert api.client.get(urlsplit(entry.link).path).mimetype == "text/html"
        assert int(enclosure.length) == record["size"]
        download = api.client.get(urlsplit(enclosure.href).path)
        assert download.status_code == 200
        assert len(download.data) == record["size"]
    assert api.client.get(urlsplit(by_title["Folge 1"].enclosures[0].href).path).data == audio


def test_revalidation_with_etag_and_last_modified(api: Api, alice: Account):
    record = api.create(alice, "a.mp3", samples.mp3_bytes(), titel="Eins")
    for url in ("/api/public/feed.atom", "/api/public/podcast.rss"):
        first = api.client.get(url)
        etag, modified = first.headers["ETag"], first.headers["Last-Modified"]
        again = api.client.get(url, headers={"If-None-Match": etag})
        assert again.status_code == 304 and again.data == b""
        since = api.client.get(url, headers={"If-Modified-Since": modified})
        assert since.status_code == 304
        other_path = api.client.get(
            url, query_string={"path": "x"}, headers={"If-None-Match": etag}
        )
        assert other_path.status_code == 200
    atom_etag = api.client.get("/api/public/feed.atom").headers["ETag"]
    api.patch(record["id"], alice, {"titel": "Zwei"})
    changed = api.client.get("/api/public/feed.atom", headers={"If-None-Match": atom_etag})
    assert changed.status_code == 200 and changed.headers["ETag"] != atom_etag
    assert feedparser.parse(changed.data).entries[0].title == "Zwei"


def test_invalid_path_is_422(api: Api):
    response = api.client.get("/api/public/feed.atom", query_string={"path": "a\x00b"})
    assert response.status_code == 422
    assert list(response.get_json()["errors"]) == ["path"]


def test_characters_xml_cannot_carry_are_refused_on_input(api: Api, alice: Account):
    record = api.create(alice, "a.mp3", samples.mp3_bytes(), titel="Eins")
    for value, code in (
        ("\x01", "U+0001"),
        ("Eins\x1bZwei", "U+001B"),
        ("\ufffe", "U+FFFE"),
        ("a\U0001ffffb", "U+1FFFF"),
        ("\ufdd0", "U+FDD0"),
    ):
        response = api.patch(record["id"], alice, {"titel": value})
        assert response.status_code == 422, value
        (message,) = response.get_json()["errors"]["titel"]
        assert code in message
    refused = api.upload(alice, [("b.wav", samples.wav_bytes())], titel="\x01\ufffe")
    assert refused.status_code == 422 and list(refused.get_json()["errors"]) == ["titel"]
    assert api.row(record["id"]).titel == "Eins" and len(api.rows()) == 1
    for url in ("/api/public/feed.atom", "/api/public/podcast.rss"):
        response = api.client.get(url, query_string={"path": "\x02"})
        assert response.status_code == 422 and list(response.get_json()["errors"]) == ["path"]
    assert api.patch(record["id"], alice, {"titel": "Tab\tund\nZeile\x7f"}).status_code == 200


def test_stored_text_xml_cannot_carry_is_left_out(api: Api, alice: Account):
    """Rows written before input was checked (an older version, `flask import`, SQL) still
    render: the characters are dropped, and a title left empty falls back to the file name."""
    dirty = api.create(alice, "a.mp3", samples.mp3_bytes())
    api.set_columns(dirty["id"], titel="Eins\x01Zwei", autoren="\x02", sachschlagwoerter="\x03,b")
    empty = api.create(alice, "leer.wav", samples.wav_bytes())
    api.set_columns(empty["id"], titel="\x01\ufffe", beschreibung=None)
    nameless = api.create(alice, "n.wav", samples.wav_bytes())
    api.set_columns(nameless["id"], titel="\x05", original_name="\x06")
    for url in ("/api/public/feed.atom", "/api/public/podcast.rss"):
        _, feed = parse(api, url)
        assert not feed.bozo
        titles = {entry.id.removeprefix("urn:uuid:"): entry.title for entry in feed.entries}
        assert titles == {
            dirty["id"]: "EinsZwei",
            empty["id"]: "leer.wav",
            nameless["id"]: nameless["id"],
        }


def test_an_empty_feed_says_when_the_public_view_last_changed(api: Api, alice: Account):
    for url in ("/api/public/feed.atom", "/api/public/podcast.rss"):
        before = datetime.now(UTC).replace(microsecond=0)
        response, feed = parse(api, url)
        assert feed.entries == [] and not feed.bozo
        updated = feed.feed.get("updated_parsed") or feed.feed.get("published_parsed")
        assert datetime(*updated[:6], tzinfo=UTC) >= before  # nothing ever released: now
        assert "Last-Modified" not in response.headers

    record = api.create(alice, "a.pdf", path="reports")
    changed_at = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
    api.set_columns(record["id"], updated_at=changed_at)
    for url in ("/api/public/feed.atom", "/api/public/podcast.rss"):
        response, feed = parse(api, url, path="presse")
        updated = feed.feed.get("updated_parsed") or feed.feed.get("published_parsed")
        assert datetime(*updated[:6], tzinfo=UTC) == changed_at
        assert response.headers["Last-Modified"] == "Tue, 04 Mar 2025 05:06:07 GMT"
        etag = response.headers["ETag"]
        again = api.client.get(
            url, query_string={"path": "presse"}, headers={"If-None-Match": etag}
        )
        assert again.status_code == 304

    assert api.delete(record["id"], alice).status_code == 204  # the removal is a change too
    response, feed = parse(api, "/api/public/feed.atom")
    updated = datetime(*feed.feed.updated_parsed[:6], tzinfo=UTC)
    assert updated > changed_at and updated.year >= 2026
    assert response.headers["ETag"] != etag
