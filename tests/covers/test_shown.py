"""Shown where people look, once the content may be downloaded: og:image and the Twitter card
on the record's page, thumbnails with alternative text on the front page, folder pages and
search results, artwork in the podcast feed and thumbnails in the Atom feed (issue 50,
point 4)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lxml import etree, html

from tests.covers.conftest import Covers, coloured_png, pdf_page
from tests.support import samples
from tests.support.api import Account, Api

ITUNES = "http://www.itunes.com/dtds/podcast-1.0.dtd"
MEDIA = "http://search.yahoo.com/mrss/"


def meta(page: str) -> dict[str, str]:
    tree = html.fromstring(page)
    found = {}
    for tag in tree.iterfind(".//meta"):
        name = tag.get("property") or tag.get("name")
        if name:
            found[name] = tag.get("content")
    return found


def test_the_record_page_names_its_cover_once_it_is_made(api: Api, alice: Account, covers: Covers):
    record = api.create(alice, "bericht.pdf", pdf_page(), freigabe="true", titel="Quote 2026")
    before = api.client.get(f"/records/{record['id']}")
    assert "og:image" not in meta(before.get_data(as_text=True))
    covers.make()
    after = api.client.get(
        f"/records/{record['id']}", headers={"If-None-Match": before.headers["ETag"]}
    )
    assert after.status_code == 200  # a new picture is a new page
    tags = meta(after.get_data(as_text=True))
    image = tags["og:image"]
    assert image.startswith(f"http://localhost/records/{record['id']}/cover/1200.jpg?v=")
    assert (tags["og:image:width"], tags["og:image:height"]) == ("1200", "1699")
    assert tags["og:image:type"] == "image/jpeg"
    assert tags["og:image:alt"] == "Titelbild: Quote 2026"
    assert tags["twitter:card"] == "summary_large_image"
    assert tags["twitter:image"] == image and tags["twitter:image:alt"] == "Titelbild: Quote 2026"
    english = api.client.get(f"/records/{record['id']}?lang=en").get_data(as_text=True)
    assert meta(english)["og:image:alt"] == "Cover: Quote 2026"
    assert covers.get(record["id"], image.rpartition("/")[2]).status_code == 200


def test_under_embargo_no_page_names_a_picture(api: Api, alice: Account, covers: Covers):
    later = (datetime.now(UTC).date() + timedelta(days=2)).isoformat()
    record = api.create(
        alice, "bericht.pdf", pdf_page(), freigabe="true", sperrfrist=later, path="presse"
    )
    covers.make()
    page = api.client.get(f"/records/{record['id']}").get_data(as_text=True)
    assert "cover" not in page and "og:image" not in meta(page)
    assert meta(page)["twitter:card"] == "summary"
    for address in ("/browse/presse", "/search?q=bericht"):
        listed = api.client.get(address)
        assert listed.status_code == 200 and record["id"] in listed.get_data(as_text=True)
        assert "/cover/" not in listed.get_data(as_text=True), address


def test_lists_show_thumbnails_with_alt_text_and_lazy_loading(
    api: Api, alice: Account, covers: Covers
):
    shown = api.create(
        alice, "foto.png", coloured_png("blue"), freigabe="true", path="bilder", titel="Blau"
    )
    plain = api.create(alice, "daten.csv", b"a;b\n1;2\n", freigabe="true", path="bilder")
    covers.make()
    for address in ("/", "/browse/bilder", "/search?q=foto"):
        tree = html.fromstring(api.client.get(address).get_data(as_text=True))
        images = tree.xpath("//ol[@class='records']//img")
        assert len(images) == 1, address
        (image,) = images
        assert image.get("alt") == "Titelbild: Blau"
        assert image.get("loading") == "lazy"
        assert image.get("src").startswith(
            f"http://localhost/records/{shown['id']}/cover/200.jpg?v="
        )
        assert (image.get("width"), image.get("height")) == ("200", "133")
        (source,) = tree.xpath("//ol[@class='records']//picture/source")
        assert source.get("type") == "image/webp" and "/cover/200.webp?v=" in source.get("srcset")
    assert plain["id"] in api.client.get("/browse/bilder").get_data(as_text=True)


def test_the_podcast_feed_carries_artwork_and_the_atom_feed_thumbnails(
    api: Api, alice: Account, covers: Covers
):
    video = api.create(alice, "clip.mp4", samples.fixture("testsrc.mp4"), freigabe="true")
    audio = api.create(alice, "tone.ogg", samples.fixture("tone-vorbis.ogg"), freigabe="true")
    covers.make()
    assert covers.put(audio["id"], alice, coloured_png("red")).status_code == 202
    covers.make()
    before = api.client.get("/api/public/podcast.rss")
    rss = etree.fromstring(before.get_data())
    channel = rss.find("channel")
    assert channel.find("image/url").text.endswith("/cover/1200.jpg")
    assert channel.find(f"{{{ITUNES}}}image").get("href") == channel.find("image/url").text
    items = {item.find("link").text.rpartition("/")[2]: item for item in channel.iterfind("item")}
    for record in (video, audio):
        href = items[record["id"]].find(f"{{{ITUNES}}}image").get("href")
        assert href == f"http://localhost/records/{record['id']}/cover/1200.jpg"
        assert covers.get(record["id"], "1200.jpg").status_code == 200
    atom = etree.fromstring(api.client.get("/api/public/feed.atom").get_data())
    thumbnails = atom.findall(f".//{{{MEDIA}}}thumbnail")
    assert len(thumbnails) == 2 and all(t.get("width") == "1200" for t in thumbnails)
    # A new picture changes the feed's tag.
    assert covers.delete(audio["id"], alice).status_code == 204
    again = api.client.get(
        "/api/public/podcast.rss", headers={"If-None-Match": before.headers["ETag"]}
    )
    assert again.status_code == 200
