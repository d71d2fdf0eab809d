"""Never early: a cover is served exactly where the record's content may be downloaded (the
public's door, a share link's holder), with the downloads' ETag and caching, and shown
nowhere before (issue 50, point 2)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from tests.covers.conftest import Covers, coloured_png, pdf_page, picture
from tests.support.api import Account, Api

NAMES = ["200.webp", "200.jpg", "1200.webp", "1200.jpg"]


def test_every_size_of_a_released_pdf_is_served_once_made(api: Api, alice: Account, covers: Covers):
    record = api.create(alice, "report.pdf", pdf_page(), freigabe="true")
    for name in NAMES:
        assert covers.get(record["id"], name).status_code == 404  # not made yet
    assert covers.make().done == 1
    (row,) = covers.rows(record["id"])
    assert (row.origin, row.source, row.last_error) == ("content", record_sha(api, record), None)
    for name in NAMES:
        response = covers.get(record["id"], name)
        assert response.status_code == 200, name
        width, ext = name.split(".")
        image = picture(response)
        assert image.format == {"webp": "WEBP", "jpg": "JPEG"}[ext]
        assert image.width == int(width)
        assert image.height == round(int(width) * 1699 / 1200)
        assert image.getpixel((image.width // 2, image.height // 2))[2] > 200  # the blue page
        assert response.headers["Content-Type"] == {"webp": "image/webp", "jpg": "image/jpeg"}[ext]
        assert response.headers["Cache-Control"] == "public, max-age=0, must-revalidate"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Content-Disposition"].startswith("inline; filename=")
        etag = response.headers["ETag"]
        assert etag.strip('"') == __import__("hashlib").sha256(response.get_data()).hexdigest()
        again = covers.get(record["id"], name, **{"If-None-Match": etag})
        assert again.status_code == 304 and again.get_data() == b""


def record_sha(api: Api, record: dict) -> str:
    row = api.row(record["id"])
    assert row is not None
    return row.checksum_sha256


@pytest.mark.parametrize("name", ["300.jpg", "200.png", "1200.gif", "200.webp.jpg", "x.jpg"])
def test_other_sizes_and_types_are_404(api: Api, alice: Account, covers: Covers, name: str):
    record = api.create(alice, "report.pdf", pdf_page(), freigabe="true")
    covers.make()
    assert covers.get(record["id"], name).status_code == 404


def test_unreleased_is_404_and_so_is_a_released_one_without_a_picture(
    api: Api, alice: Account, covers: Covers
):
    hidden = api.create(alice, "report.pdf", pdf_page(), freigabe="false")
    table = api.create(alice, "table.csv", b"a;b\n1;2\n", freigabe="true")
    covers.make()
    assert len(covers.rows(hidden["id"])) == 1  # made privately, never served
    assert covers.rows(table["id"]) == []  # nothing to draw of a CSV
    for record in (hidden, table):
        response = covers.get(record["id"])
        assert response.status_code == 404
        assert response.headers["Content-Type"].startswith("text/html")
    assert api.patch(hidden["id"], alice, {"freigabe": True}).status_code == 200
    assert covers.get(hidden["id"]).status_code == 200
    assert api.patch(hidden["id"], alice, {"freigabe": False}).status_code == 200
    assert covers.get(hidden["id"]).status_code == 404


def test_under_embargo_it_is_404_not_403_until_the_day_it_ends(
    api: Api, alice: Account, covers: Covers
):
    tomorrow = (datetime.now(UTC).date() + timedelta(days=1)).isoformat()
    record = api.create(alice, "report.pdf", pdf_page(), freigabe="true", sperrfrist=tomorrow)
    covers.make()
    assert api.get(f"/api/public/files/{record['id']}/download").status_code == 403
    assert covers.get(record["id"]).status_code == 404
    api.set_columns(record["id"], sperrfrist=datetime.now(UTC).date())
    assert covers.get(record["id"]).status_code == 200


def test_an_unknown_or_malformed_id_is_404(api: Api, covers: Covers):
    assert covers.get("00000000-0000-4000-8000-000000000000").status_code == 404
    assert api.client.get("/records/not-a-uuid/cover/200.jpg").status_code == 404


def test_a_share_link_holder_sees_it_where_the_holder_may_download(
    api: Api, alice: Account, covers: Covers
):
    unreleased = api.create(alice, "photo.png", coloured_png("red"), freigabe="false")
    embargoed = api.create(
        alice, "report.pdf", pdf_page(), freigabe="true", sperrfrist=date(2099, 1, 1).isoformat()
    )
    other = api.create(alice, "other.png", coloured_png("green"), freigabe="true")
    covers.make()
    expires = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    for record in (unreleased, embargoed):
        made = api.client.post(
            f"/api/files/{record['id']}/links", json={"expires_at": expires}, headers=alice.auth
        )
        assert made.status_code == 201, made.get_json()
        secret = made.get_json()["url"].rpartition("/")[2]
        base = f"/s/{secret}/files"
        response = api.client.get(f"{base}/{record['id']}/cover/200.webp")
        assert response.status_code == 200
        assert response.headers["Cache-Control"] == "private, no-store"
        assert response.headers["Referrer-Policy"] == "no-referrer"
        assert picture(response).width == 200
        # The public still gets nothing, and the link names no other record.
        assert covers.get(record["id"], "200.webp").status_code == 404
        assert api.client.get(f"{base}/{other['id']}/cover/200.webp").status_code == 404
    assert api.client.get(f"/s/nope/files/{other['id']}/cover/200.webp").status_code == 404


def test_the_holders_page_shows_the_cover_under_its_own_address(
    api: Api, alice: Account, covers: Covers
):
    record = api.create(alice, "photo.png", coloured_png("red"), freigabe="false", titel="Rot")
    covers.make()
    expires = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    made = api.client.post(
        f"/api/files/{record['id']}/links", json={"expires_at": expires}, headers=alice.auth
    )
    url = made.get_json()["url"]
    page = api.client.get(url.removeprefix("http://localhost")).get_data(as_text=True)
    src = f"{url}/files/{record['id']}/cover/200.jpg?v="
    assert f'src="{src}' in page and 'alt="Titelbild: Rot"' in page
    picture_at = page.partition(f'src="{src}')[2].partition('"')[0]
    assert api.client.get(f"{src}{picture_at}".removeprefix("http://localhost")).status_code == 200
