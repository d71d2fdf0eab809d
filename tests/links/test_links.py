"""Share links (issue 24): what the owner makes and sees, what a holder reaches without a
token, for how long, and what is left in the audit trail."""

from __future__ import annotations

import hashlib
import io
import uuid
import zipfile
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import update

from app import create_app
from app.extensions import db
from app.links import routes, services
from app.models import ShareLink
from tests.support import samples
from tests.support.api import Account, Api

HOLDER_HEADERS = {
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "private, no-store",
    "X-Robots-Tag": "noindex",
}
TOMORROW = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


def future(days: float = 1) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def record_link(api: Api, account: Account, record_id: str, **body: Any) -> Any:
    body.setdefault("expires_at", TOMORROW)
    return api.client.post(f"/api/files/{record_id}/links", json=body, headers=account.auth)


def kit(api: Api, account: Account, path: str, **body: Any) -> Any:
    body.setdefault("expires_at", TOMORROW)
    return api.client.post("/api/links", json={"path": path, **body}, headers=account.auth)


def secret_of(link: dict[str, Any]) -> str:
    return link["url"].rsplit("/", 1)[1]


def shared(api: Api, link: dict[str, Any], tail: str = "", **kwargs: Any) -> Any:
    return api.client.get(f"/api/shared/{secret_of(link)}{tail}", **kwargs)


def expire(app: Flask, link_id: str) -> None:
    with app.app_context():
        db.session.execute(
            update(ShareLink)
            .where(ShareLink.id == uuid.UUID(link_id))
            .values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
        )
        db.session.commit()


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def the_one_link(api: Api, account: Account) -> dict[str, Any]:
    links = api.get("/api/links", account).get_json()["data"]
    assert len(links) == 1
    return links[0]


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The links' clock (creating, resolving, counting uses, listing) held still."""
    clock = Clock()
    monkeypatch.setattr(services, "utcnow", clock)
    monkeypatch.setattr(routes, "utcnow", clock)
    return clock


def test_a_record_link_opens_the_embargoed_record_and_its_content(api: Api, alice: Account) -> None:
    data = samples.pdf_bytes()
    embargo = (datetime.now(UTC).date() + timedelta(days=5)).isoformat()
    record = api.create(
        alice, "bericht.pdf", data, freigabe=0, sperrfrist=embargo, erstellt_von="Alice"
    )
    response = record_link(api, alice, record["id"], description="Redaktion Wirtschaft")
    assert response.status_code == 201
    link = response.get_json()
    assert link["url"].startswith("http://localhost/s/")
    assert len(secret_of(link)) >= 43  # 256 bits, URL-safe
    assert link["state"] == "active" and link["downloads"] == 0
    assert link["description"] == "Redaktion Wirtschaft"
    assert link["created_by"] == alice.email and link["record_id"] == record["id"]

    page = shared(api, link)
    assert page.status_code == 200
    body = page.get_json()
    assert body["id"] == record["id"] and body["sperrfrist"] == embargo
    assert "erstellt_von" not in body and "freigegeben_von" not in body
    assert body["link_expires_at"] == link["expires_at"]
    for name, value in HOLDER_HEADERS.items():
        assert page.headers[name] == value

    # The public and the download without a link see nothing of it.
    assert api.get(f"/api/public/files/{record['id']}").status_code == 404
    download = shared(api, link, f"/files/{record['id']}/download")
    assert download.status_code == 200 and download.data == data
    for name, value in HOLDER_HEADERS.items():
        assert download.headers[name] == value
    assert download.headers["ETag"] == f'"{hashlib.sha256(data).hexdigest()}"'
    ranged = shared(api, link, f"/files/{record['id']}/download", headers={"Range": "bytes=1-4"})
    assert ranged.status_code == 206 and ranged.data == data[1:5]

    listed = api.get(f"/api/files/{record['id']}/links", alice).get_json()["data"]
    assert len(listed) == 1 and "url" not in listed[0]
    assert listed[0]["downloads"] == 1  # the range from byte 1 is no new download
    assert listed[0]["first_used_at"] is not None
    assert listed[0]["last_used_at"] >= listed[0]["first_used_at"]


def test_a_record_link_reaches_nothing_else(api: Api, alice: Account) -> None:
    record = api.create(alice, "a.pdf", freigabe=0)
    other = api.create(alice, "b.pdf", freigabe=1)
    link = record_link(api, alice, record["id"]).get_json()
    assert shared(api, link, f"/files/{other['id']}/download").status_code == 404
    assert shared(api, link, f"/files/{uuid.uuid4()}/download").status_code == 404
    archive = shared(api, link, "/files.zip")
    assert archive.status_code == 200
    names = zipfile.ZipFile(io.BytesIO(archive.data)).namelist()
    assert names == ["manifest.json", "a.pdf"]


def test_a_replaced_record_serves_its_new_content_and_a_deleted_one_404(
    api: Api, alice: Account
) -> None:
    record = api.create(alice, "a.pdf")
    link = record_link(api, alice, record["id"]).get_json()
    png = samples.png_bytes()
    assert api.replace(alice, record["id"], "bild.png", png).status_code == 200
    assert shared(api, link, f"/files/{record['id']}/download").data == png
    assert api.delete(record["id"], alice).status_code == 204
    assert shared(api, link).status_code == 404
    assert shared(api, link, f"/files/{record['id']}/download").status_code == 404


def test_only_the_owner_or_an_administrator_makes_a_record_link(
    api: Api, alice: Account, bob: Account, admin: Account
) -> None:
    record = api.create(alice)
    assert record_link(api, bob, record["id"]).status_code == 404
    assert api.client.post(f"/api/files/{record['id']}/links", json={}).status_code == 401
    assert record_link(api, admin, record["id"]).status_code == 201
    # The owner sees the administrator's link to her record and may revoke it.
    listed = api.get(f"/api/files/{record['id']}/links", alice).get_json()["data"]
    assert [link["created_by"] for link in listed] == [admin.email]
    assert api.get(f"/api/files/{record['id']}/links", bob).status_code == 404


@pytest.mark.parametrize(
    ("expires_at", "message"),
    [
        (None, "The expires_at field is required."),
        ("morgen", "ISO 8601"),
        ("2020-01-01T00:00:00Z", "in the future"),
        ("in 91 days", "at most 90 days"),
    ],
)
def test_expiry_is_required_future_and_bounded(
    api: Api, alice: Account, expires_at: str | None, message: str
) -> None:
    record = api.create(alice)
    body: dict[str, Any] = {} if expires_at is None else {"expires_at": expires_at}
    if expires_at == "in 91 days":
        body["expires_at"] = future(91)
    response = api.client.post(f"/api/files/{record['id']}/links", json=body, headers=alice.auth)
    assert response.status_code == 422
    assert list(response.get_json()["errors"]) == ["expires_at"]
    assert message in response.get_json()["errors"]["expires_at"][0]
    assert api.get(f"/api/files/{record['id']}/links", alice).get_json()["data"] == []


def test_an_expiry_must_be_later_than_now_to_the_second(
    api: Api, alice: Account, clock: Clock
) -> None:
    record = api.create(alice)
    response = record_link(api, alice, record["id"], expires_at=stamp(clock.now))
    assert response.status_code == 422
    message = "The expires_at field must be in the future."
    assert response.get_json() == {"message": message, "errors": {"expires_at": [message]}}
    assert api.get("/api/links", alice).get_json()["data"] == []


def test_an_expiry_may_be_the_maximum_ahead_to_the_second_and_no_later(
    api: Api, alice: Account, clock: Clock
) -> None:
    record = api.create(alice)
    furthest = clock.now + timedelta(days=90)
    response = record_link(api, alice, record["id"], expires_at=stamp(furthest))
    assert response.status_code == 201, response.get_json()
    assert the_one_link(api, alice)["expires_at"] == response.get_json()["expires_at"]
    beyond = record_link(
        api, alice, record["id"], expires_at=stamp(furthest + timedelta(seconds=1))
    )
    assert beyond.status_code == 422
    message = "The expires_at field must be at most 90 days ahead."
    assert beyond.get_json() == {"message": message, "errors": {"expires_at": [message]}}


def test_revocation_answers_404_from_the_next_request(api: Api, alice: Account) -> None:
    record = api.create(alice)
    link = record_link(api, alice, record["id"]).get_json()
    path = f"/api/files/{record['id']}/links/{link['id']}"
    assert api.client.delete(path, headers=alice.auth).status_code == 204
    response = shared(api, link)
    assert response.status_code == 404
    assert response.get_json() == {"message": "Not found."}
    for name, value in HOLDER_HEADERS.items():
        assert response.headers[name] == value
    listed = api.get(f"/api/files/{record['id']}/links", alice).get_json()["data"]
    assert listed[0]["state"] == "revoked"


def test_an_expired_link_answers_410_with_its_expiry(api: Api, alice: Account, app: Flask) -> None:
    record = api.create(alice)
    link = record_link(api, alice, record["id"]).get_json()
    expire(app, link["id"])
    response = shared(api, link, f"/files/{record['id']}/download")
    assert response.status_code == 410
    with app.app_context():
        expired_at = db.session.get(ShareLink, uuid.UUID(link["id"])).expires_at
    assert response.get_json() == {
        "message": f"This link expired at {expired_at.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}."
    }
    assert secret_of(link) not in response.get_data(as_text=True)
    assert api.get("/api/links", alice).get_json()["data"][0]["state"] == "expired"


def test_a_link_is_expired_from_its_expiry_instant_on(
    api: Api, alice: Account, clock: Clock
) -> None:
    record = api.create(alice)
    expires = clock.now + timedelta(hours=1)
    link = record_link(api, alice, record["id"], expires_at=stamp(expires)).get_json()
    clock.now = expires - timedelta(seconds=1)
    assert shared(api, link, f"/files/{record['id']}/download").status_code == 200
    assert the_one_link(api, alice)["state"] == "active"
    clock.now = expires
    response = shared(api, link, f"/files/{record['id']}/download")
    assert response.status_code == 410
    assert response.get_json() == {
        "message": f"This link expired at {expires.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}."
    }
    assert the_one_link(api, alice)["state"] == "expired"


def test_a_links_first_use_is_kept_and_its_last_use_follows(
    api: Api, alice: Account, clock: Clock
) -> None:
    record = api.create(alice)
    link = record_link(api, alice, record["id"]).get_json()
    first = clock.now + timedelta(minutes=1)
    clock.now = first
    assert shared(api, link, f"/files/{record['id']}/download").status_code == 200
    clock.now = first + timedelta(minutes=5)
    assert shared(api, link, f"/files/{record['id']}/download").status_code == 200
    used = the_one_link(api, alice)
    assert used["downloads"] == 2
    assert used["first_used_at"] == first.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert used["last_used_at"] == clock.now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_a_deactivated_creators_links_stop_working(
    api: Api, alice: Account, app: Flask, runner: Any
) -> None:
    record = api.create(alice)
    link = record_link(api, alice, record["id"]).get_json()
    assert shared(api, link).status_code == 200
    result = runner.invoke(args=["users", "deactivate", alice.email])
    assert result.exit_code == 0, result.output
    assert shared(api, link).status_code == 404


def test_a_press_kit_covers_the_creators_records_in_the_folder_at_each_use(
    api: Api, alice: Account, bob: Account
) -> None:
    first = api.create(alice, "bericht.pdf", path="presse/2026-12", freigabe=0)
    below = api.create(alice, "daten.csv", b"a,b\n1,2\n", path="presse/2026-12/daten")
    api.create(alice, "nachbar.pdf", path="presse/2026-12-geheim", freigabe=0)
    bobs = api.create(bob, "fremd.pdf", path="presse/2026-12")
    response = kit(api, alice, "presse/2026-12/", description="Presse")
    assert response.status_code == 201
    link = response.get_json()
    assert link["path"] == "presse/2026-12" and link["record_id"] is None

    page = shared(api, link).get_json()
    assert {r["id"] for r in page["data"]} == {first["id"], below["id"]}
    assert page["total"] == 2 and page["folder"] == "presse/2026-12"
    assert shared(api, link, f"/files/{bobs['id']}/download").status_code == 404

    later = api.create(alice, "bild.png", samples.png_bytes(), path="presse/2026-12")
    assert api.patch(first["id"], alice, {"path": "anderswo"}).status_code == 200
    page = shared(api, link).get_json()
    assert {r["id"] for r in page["data"]} == {later["id"], below["id"]}
    assert shared(api, link, f"/files/{first['id']}/download").status_code == 404

    archive = zipfile.ZipFile(io.BytesIO(shared(api, link, "/files.zip").data))
    assert sorted(archive.namelist()) == [
        "manifest.json",
        "presse/2026-12/bild.png",
        "presse/2026-12/daten/daten.csv",
    ]
    mine = api.get("/api/links", alice).get_json()["data"]
    assert mine[0]["downloads"] == 1  # the ZIP; page views count as use, not as downloads
    assert (
        shared(api, link, "/files.zip")
        .headers["Content-Disposition"]
        .startswith('attachment; filename="2026-12.zip"')
    )


def test_an_administrators_kit_covers_everyones_records(
    api: Api, alice: Account, bob: Account, admin: Account
) -> None:
    ids = {api.create(u, path="presse/x", freigabe=0)["id"] for u in (alice, bob)}
    link = kit(api, admin, "presse/x").get_json()
    assert {r["id"] for r in shared(api, link).get_json()["data"]} == ids


def test_listing_and_revoking_links(api: Api, alice: Account, bob: Account, admin: Account) -> None:
    record = api.create(alice)
    mine = record_link(api, alice, record["id"]).get_json()
    folder = kit(api, alice, "presse").get_json()
    theirs = kit(api, bob, "presse").get_json()
    assert [x["id"] for x in api.get("/api/links", alice).get_json()["data"]] == [
        folder["id"],
        mine["id"],
    ]
    everyone = api.get("/api/links", admin).get_json()["data"]
    assert {x["id"] for x in everyone} == {mine["id"], folder["id"], theirs["id"]}
    by_record = api.get(f"/api/links?record_id={record['id']}", admin).get_json()["data"]
    assert [x["id"] for x in by_record] == [mine["id"]]
    by_path = api.get("/api/links?path=presse", admin).get_json()["data"]
    assert {x["id"] for x in by_path} == {folder["id"], theirs["id"]}
    assert api.get("/api/links").status_code == 401

    assert api.client.delete(f"/api/links/{theirs['id']}", headers=alice.auth).status_code == 404
    assert shared(api, theirs).status_code == 200
    assert api.client.delete(f"/api/links/{theirs['id']}", headers=admin.auth).status_code == 204
    assert shared(api, theirs).status_code == 404
    assert api.client.delete(f"/api/links/{folder['id']}", headers=alice.auth).status_code == 204
    assert shared(api, folder).status_code == 404


def test_creating_and_revoking_are_in_the_audit_trail_without_the_secret(
    api: Api, alice: Account, admin: Account
) -> None:
    record = api.create(alice)
    link = record_link(api, alice, record["id"], description="Redaktion").get_json()
    folder = kit(api, alice, "presse").get_json()
    api.client.delete(f"/api/files/{record['id']}/links/{link['id']}", headers=alice.auth)
    response = api.get("/api/audit?action=link.create", admin)
    entries = response.get_json()["data"]
    assert [e["changes"]["link_id"] for e in entries] == [folder["id"], link["id"]]
    assert entries[1]["actor"] == alice.email and entries[1]["record_id"] == record["id"]
    assert entries[1]["changes"]["expires_at"] == link["expires_at"]
    assert entries[1]["changes"]["description"] == "Redaktion"
    assert entries[0]["changes"]["path"] == "presse"
    revoked = api.get("/api/audit?action=link.revoke", admin).get_json()["data"]
    assert [e["changes"]["link_id"] for e in revoked] == [link["id"]]
    trail = api.get("/api/audit", admin).get_data(as_text=True)
    for secret in (secret_of(link), secret_of(folder)):
        assert secret not in trail
    history = api.get(f"/api/files/{record['id']}/history", alice).get_json()["data"]
    assert [e["action"] for e in history][-2:] == ["link.create", "link.revoke"]


def test_unknown_and_malformed_secrets_are_404_without_the_secret(api: Api) -> None:
    guess = "A" * 43
    for path in (f"/api/shared/{guess}", f"/api/shared/{guess}/files.zip", "/api/shared/x"):
        response = api.client.get(path)
        assert response.status_code == 404
        assert guess not in response.get_data(as_text=True)
        for name, value in HOLDER_HEADERS.items():
            assert response.headers[name] == value


def test_downloads_through_a_link_are_offloaded_like_the_others(
    api: Api, alice: Account, stack_config: dict[str, Any]
) -> None:
    """DOWNLOAD_OFFLOAD=nginx applies to this door too: headers here, bytes from the proxy."""
    record = api.create(alice, "a.pdf", freigabe=0)
    link = record_link(api, alice, record["id"]).get_json()
    app = create_app(
        {**stack_config, "DOWNLOAD_OFFLOAD": "nginx", "DOWNLOAD_OFFLOAD_PREFIX": "/internal/"}
    )
    try:
        response = app.test_client().get(
            f"/api/shared/{secret_of(link)}/files/{record['id']}/download"
        )
        assert response.status_code == 200 and response.data == b""
        assert response.headers["X-Accel-Redirect"].startswith("/internal/")
        assert response.headers["Referrer-Policy"] == "no-referrer"
        assert response.headers["Cache-Control"] == "private, no-store"
    finally:
        with app.app_context():
            db.engine.dispose()


@pytest.mark.parametrize("path", [None, "", "../x", "a//b", 5])
def test_a_kit_needs_a_folder(api: Api, alice: Account, path: Any) -> None:
    body: dict[str, Any] = {"expires_at": TOMORROW}
    if path is not None:
        body["path"] = path
    response = api.client.post("/api/links", json=body, headers=alice.auth)
    assert response.status_code == 422
    assert list(response.get_json()["errors"]) == ["path"]
    assert api.get("/api/links", alice).get_json()["data"] == []


def test_who_may_revoke_a_link_to_a_record(
    api: Api, alice: Account, bob: Account, admin: Account
) -> None:
    """The record's owner may revoke an administrator's link to it; nobody else, and no link
    through the address of another record; an unknown link is 404 (issue 37: mutants of
    `revoke` that no test noticed)."""
    record = api.create(alice, freigabe="0")
    other = api.create(alice, "other.pdf")
    theirs = record_link(api, admin, record["id"]).get_json()
    assert api.client.delete(f"/api/links/{uuid.uuid4()}", headers=alice.auth).status_code == 404
    assert api.client.delete(f"/api/links/{theirs['id']}", headers=bob.auth).status_code == 404
    wrong_record = f"/api/files/{other['id']}/links/{theirs['id']}"
    assert api.client.delete(wrong_record, headers=alice.auth).status_code == 404
    assert api.client.delete(wrong_record, headers=admin.auth).status_code == 404
    assert shared(api, theirs).status_code == 200
    assert api.client.delete(f"/api/links/{theirs['id']}", headers=alice.auth).status_code == 204
    assert shared(api, theirs).status_code == 404
    # Through the record's own address, for a record the public may not see (unreleased).
    mine = record_link(api, alice, record["id"]).get_json()
    own_record = f"/api/files/{record['id']}/links/{mine['id']}"
    assert api.client.delete(own_record, headers=alice.auth).status_code == 204
    assert shared(api, mine).status_code == 404
