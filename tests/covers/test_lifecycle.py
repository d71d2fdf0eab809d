"""Never stale: a replacement, a deletion and an approved change bring new pictures and
delete the old ones with the content; a held change's picture stays private until its
approval; reconcile and verify know every picture; `flask covers make` backfills (issue 50,
points 1 and 2)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import delete

from app.extensions import db
from app.models import Cover
from tests.covers.conftest import Covers, pdf_page, picture
from tests.releases.conftest import grant_approver
from tests.support.api import Account, Api

BLUE, RED = (0, 0, 1), (1, 0, 0)


def colour_of(response: Any) -> tuple[int, int, int]:
    image = picture(response).convert("RGB")
    return image.getpixel((image.width // 2, image.height // 2))


def test_a_replacement_shows_no_picture_until_its_own_and_deletes_the_old(
    api: Api, alice: Account, covers: Covers
):
    record = api.create(alice, "report.pdf", pdf_page(BLUE), freigabe="true")
    covers.make()
    old = covers.keys()
    assert len(old) == 4 and colour_of(covers.get(record["id"]))[2] > 200
    assert api.replace(alice, record["id"], "report.pdf", pdf_page(RED)).status_code == 200
    # The old pictures went with the old content; the new ones are not made yet.
    assert covers.keys() == set()
    assert covers.get(record["id"]).status_code == 404
    covers.make()
    assert colour_of(covers.get(record["id"]))[0] > 200
    assert len(covers.keys()) == 4 and not covers.keys() & old
    assert [row.source for row in covers.rows()] == [api.row(record["id"]).checksum_sha256]


def test_a_deleted_record_leaves_no_picture_and_no_row(api: Api, alice: Account, covers: Covers):
    record = api.create(alice, "report.pdf", pdf_page(), freigabe="true")
    covers.make()
    assert covers.put(record["id"], alice, picture_bytes()).status_code == 202
    covers.make()
    assert len(covers.keys()) == 9  # 4 + 4 pictures and the owner's upload
    assert api.delete(record["id"], alice).status_code == 204
    assert covers.keys() == set() and covers.rows() == []
    assert covers.get(record["id"]).status_code == 404


def test_a_cover_made_while_its_record_changed_is_thrown_away(
    api: Api, alice: Account, covers: Covers, monkeypatch: pytest.MonkeyPatch
):
    """A replacement while the worker draws: the worker's pictures are deleted again, the
    new content's cover is made next."""
    from app.covers import making

    record = api.create(alice, "report.pdf", pdf_page(BLUE), freigabe="true")
    real = making.render

    def replaced_meanwhile(*args: Any) -> Any:
        drawn = real(*args)
        response = api.replace(alice, record["id"], "report.pdf", pdf_page(RED))
        assert response.status_code == 200
        return drawn

    monkeypatch.setattr(making, "render", replaced_meanwhile)
    covers.make()
    assert covers.keys() == set()
    monkeypatch.setattr(making, "render", real)
    covers.make()
    assert colour_of(covers.get(record["id"]))[0] > 200 and len(covers.keys()) == 4


def picture_bytes() -> bytes:
    from tests.covers.conftest import coloured_png

    return coloured_png("green")


@pytest.fixture
def approving(app: Any) -> Any:
    app.config["RELEASE_APPROVAL"] = "on"
    return app


def test_a_held_change_is_pictured_privately_and_switched_in_at_its_approval(
    api: Api, alice: Account, admin: Account, covers: Covers, approving: Any
):
    carol = api.account("carol@example.org")
    grant_approver(api.app, carol)
    record = api.create(alice, "report.pdf", pdf_page(BLUE))  # asks for release
    request = api.get(f"/api/files/{record['id']}", alice).get_json()["release_request"]["id"]
    assert approve(api, request, carol).status_code == 200
    covers.make()
    blue = covers.get(record["id"]).get_data()
    changed = api.replace(alice, record["id"], "report.pdf", pdf_page(RED))
    assert changed.status_code == 200
    change = changed.get_json()["release_request"]["id"]
    covers.make()
    rows = covers.rows(record["id"])
    assert len(rows) == 2 and all(row.key for row in rows)  # the draft's is made, privately
    assert len(covers.keys()) == 8
    assert covers.get(record["id"]).get_data() == blue  # the public keeps the approved one
    assert approve(api, change, carol).status_code == 200
    assert colour_of(covers.get(record["id"]))[0] > 200  # switched in with its bytes
    assert len(covers.keys()) == 4 and len(covers.rows(record["id"])) == 1


def test_a_declined_change_takes_its_picture_with_it(
    api: Api, alice: Account, covers: Covers, approving: Any
):
    carol = api.account("carol@example.org")
    grant_approver(api.app, carol)
    record = api.create(alice, "report.pdf", pdf_page(BLUE))
    request = api.get(f"/api/files/{record['id']}", alice).get_json()["release_request"]["id"]
    assert approve(api, request, carol).status_code == 200
    change = api.replace(alice, record["id"], "r.pdf", pdf_page(RED)).get_json()
    covers.make()
    assert len(covers.keys()) == 8
    declined = api.client.post(
        f"/api/release-requests/{change['release_request']['id']}/decline",
        json={"reason": "no"},
        headers=carol.auth,
    )
    assert declined.status_code == 200, declined.get_json()
    assert len(covers.keys()) == 4 and len(covers.rows(record["id"])) == 1
    assert colour_of(covers.get(record["id"]))[2] > 200


def approve(api: Api, request_id: str, account: Account) -> Any:
    return api.client.post(
        f"/api/release-requests/{request_id}/approve", json={}, headers=account.auth
    )


def test_reconcile_and_verify_know_the_pictures(api: Api, alice: Account, covers: Covers):
    record = api.create(alice, "report.pdf", pdf_page(), freigabe="true")
    covers.make()
    runner = api.app.test_cli_runner()
    result = runner.invoke(args=["storage", "reconcile", "--grace-minutes", "0"])
    assert result.exit_code == 0, result.output
    assert "orphaned objects: 0" in result.output
    result = runner.invoke(args=["storage", "verify"])
    assert result.exit_code == 0 and "and 4 cover pictures" in result.output, result.output
    # A picture whose bytes changed is a problem; one left without a row is an orphan.
    storage = api.app.extensions["storage"]
    key = next(k for k in covers.keys() if k.endswith("-200.jpg"))
    storage.put(key, __import__("io").BytesIO(b"not the picture"))
    result = runner.invoke(args=["storage", "verify"])
    assert result.exit_code == 1 and f"{record['id']} cover: size" in result.output
    storage.put("covers/stray/x-200.jpg", __import__("io").BytesIO(b"stray"))
    result = runner.invoke(args=["storage", "reconcile", "--grace-minutes", "0", "--fix"])
    assert "removed object covers/stray/x-200.jpg" in result.output, result.output
    assert len(covers.keys()) == 4
    storage.delete(key)
    result = runner.invoke(args=["storage", "reconcile", "--grace-minutes", "0"])
    assert result.exit_code == 1 and f"record {record['id']} cover has no object" in result.output


def test_covers_make_backfills_records_from_before_covers(api: Api, alice: Account, covers: Covers):
    records = [
        api.create(alice, f"r{i}.pdf", pdf_page((0, 0, i / 3)), freigabe="true") for i in range(3)
    ]
    with api.app.app_context():
        db.session.execute(delete(Cover))
        db.session.commit()
    result = api.app.test_cli_runner().invoke(args=["covers", "make"])
    assert result.exit_code == 0, result.output
    assert "covers made in all: 3" in result.output
    for record in records:
        assert covers.get(record["id"]).status_code == 200
    before = covers.keys()
    result = api.app.test_cli_runner().invoke(args=["covers", "make", "--all"])
    assert result.exit_code == 0 and "covers worked: 3" in result.output, result.output
    assert len(covers.keys()) == 12 and not covers.keys() & before  # made anew, old ones gone
