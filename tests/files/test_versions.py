"""Versions (issue 39): the number, the revision history, ETag and If-Match, kept releases."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import uuid
import zipfile
from datetime import date, timedelta

from sqlalchemy import select

from app.extensions import db
from app.models import AuditEntry, FileVersion, PendingObjectDeletion
from tests.support import samples
from tests.support.api import Account, Api

V1 = b"first version\n"
V2 = b"second version, corrected\n"
V3 = b"third version, corrected again\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def version_rows(api: Api, record_id: str) -> list[FileVersion]:
    with api.app.app_context():
        rows = db.session.scalars(
            select(FileVersion)
            .where(FileVersion.record_id == uuid.UUID(record_id))
            .order_by(FileVersion.number)
        ).all()
        db.session.expunge_all()
        return list(rows)


def audit_actions(api: Api, record_id: str) -> list[tuple[str, dict]]:
    with api.app.app_context():
        entries = db.session.scalars(
            select(AuditEntry)
            .where(AuditEntry.record_id == uuid.UUID(record_id))
            .order_by(AuditEntry.seq)
        ).all()
        return [(entry.action, json.loads(entry.changes)) for entry in entries]


def keep(api: Api, on: bool) -> None:
    api.app.config["KEEP_RELEASED_VERSIONS"] = "on" if on else "off"


# --- the number and the history -----------------------------------------------------------


def test_version_counts_replacements_that_change_the_bytes(api: Api, alice: Account):
    record = api.create(alice, "a.txt", V1)
    assert record["version"] == 1
    rid = record["id"]

    second = api.replace(alice, rid, "b.txt", V2, change_note="Typo fixed")
    assert second.status_code == 200
    assert second.get_json()["version"] == 2
    third = api.replace(alice, rid, "c.txt", V3)
    assert third.get_json()["version"] == 3
    assert api.get(f"/api/files/{rid}", alice).get_json()["version"] == 3

    listed = api.get(f"/api/files/{rid}/versions", alice)
    assert listed.status_code == 200
    body = listed.get_json()
    assert body["total"] == 2
    assert [
        (v["number"], v["sha256"], v["size"], v["original_name"], v["change_note"], v["kept"])
        for v in body["data"]
    ] == [
        (2, sha(V2), len(V2), "b.txt", None, False),
        (1, sha(V1), len(V1), "a.txt", "Typo fixed", False),
    ]
    assert all(
        v["replaced_by"] == alice.id and v["mime_type"] == "text/plain" for v in body["data"]
    )
    assert body["data"][0]["replaced_at"] == third.get_json()["updated_at"]
    # Kept off: only the current content is stored.
    assert api.objects() == {api.row(rid).stored_path}


def test_identical_bytes_change_nothing(api: Api, alice: Account):
    record = api.create(alice, "a.txt", V1)
    rid = record["id"]
    before = api.row(rid)
    entries = audit_actions(api, rid)

    again = api.replace(alice, rid, "renamed.txt", V1, change_note="nothing really")
    assert again.status_code == 200
    body = again.get_json()
    assert (body["version"], body["original_name"]) == (1, "a.txt")
    after = api.row(rid)
    assert (after.updated_at, after.stored_path, after.version) == (
        before.updated_at,
        before.stored_path,
        1,
    )
    assert version_rows(api, rid) == []
    assert audit_actions(api, rid) == entries
    assert api.objects() == {before.stored_path}
    assert again.headers["ETag"] == api.get(f"/api/files/{rid}", alice).headers["ETag"]


def test_the_history_is_the_owners_and_the_administrators(
    api: Api, alice: Account, bob: Account, admin: Account
):
    rid = api.create(alice, "a.txt", V1)["id"]
    api.replace(alice, rid, "b.txt", V2)
    assert api.get(f"/api/files/{rid}/versions", bob).status_code == 404
    assert api.get(f"/api/files/{rid}/versions").status_code == 401
    assert api.get(f"/api/files/{uuid.uuid4()}/versions", alice).status_code == 404
    assert api.get(f"/api/files/{rid}/versions", admin).get_json()["total"] == 1
    # An administrator's replacement is theirs.
    api.replace(admin, rid, "c.txt", V3)
    rows = version_rows(api, rid)
    assert [(r.number, r.replaced_by) for r in rows] == [(1, alice.id), (2, admin.id)]


def test_the_history_is_paged(api: Api, alice: Account):
    api.app.config["PAGE_SIZE"] = 2
    rid = api.create(alice, "a.txt", V1)["id"]
    for n in range(2, 6):
        assert api.replace(alice, rid, "a.txt", f"version {n}\n".encode()).status_code == 200
    first = api.get(f"/api/files/{rid}/versions", alice).get_json()
    assert (first["total"], first["last_page"]) == (4, 2)
    assert [v["number"] for v in first["data"]] == [4, 3]
    second = api.get(f"/api/files/{rid}/versions?page=2", alice).get_json()
    assert [v["number"] for v in second["data"]] == [2, 1]
    assert api.get(f"/api/files/{rid}/versions?page=0", alice).status_code == 422


def test_a_bad_change_note_is_422_and_changes_nothing(api: Api, alice: Account):
    rid = api.create(alice, "a.txt", V1)["id"]
    before = api.row(rid)
    response = api.replace(alice, rid, "b.txt", V2, change_note="x" * 5001)
    assert response.status_code == 422
    assert list(response.get_json()["errors"]) == ["change_note"]
    after = api.row(rid)
    assert (after.version, after.stored_path, after.updated_at) == (
        1,
        before.stored_path,
        before.updated_at,
    )
    assert api.objects() == {before.stored_path}
    assert version_rows(api, rid) == []


def test_audit_entries_carry_old_and_new_version_and_checksum(api: Api, alice: Account):
    rid = api.create(alice, "a.txt", V1)["id"]
    api.replace(alice, rid, "b.txt", V2)
    action, changes = audit_actions(api, rid)[-1]
    assert action == "file.replace"
    assert (changes["old"]["version"], changes["old"]["sha256"]) == (1, sha(V1))
    assert (changes["new"]["version"], changes["new"]["sha256"]) == (2, sha(V2))


# --- ETag and If-Match -----------------------------------------------------------------


def test_record_answers_carry_an_etag_that_changes_with_every_change(api: Api, alice: Account):
    rid = api.create(alice, "a.txt", V1)["id"]
    read = api.get(f"/api/files/{rid}", alice)
    first = read.headers["ETag"]
    assert first.startswith('"1.')
    assert api.get(f"/api/files/{rid}", alice).headers["ETag"] == first

    patched = api.patch(rid, alice, {"titel": "Neu"})
    assert patched.headers["ETag"] not in (None, first)
    assert api.get(f"/api/files/{rid}", alice).headers["ETag"] == patched.headers["ETag"]

    replaced = api.replace(alice, rid, "b.txt", V2)
    assert replaced.headers["ETag"].startswith('"2.')
    assert replaced.headers["ETag"] != patched.headers["ETag"]
    # The public answer of the record carries the same tag.
    assert api.get(f"/api/public/files/{rid}").headers["ETag"] == replaced.headers["ETag"]


def test_patch_with_a_stale_if_match_is_412_and_changes_nothing(api: Api, alice: Account):
    rid = api.create(alice, "a.txt", V1, titel="Alt")["id"]
    stale = api.get(f"/api/files/{rid}", alice).headers["ETag"]
    fresh = api.patch(rid, alice, {"titel": "Zwischen"}).headers["ETag"]

    refused = api.client.patch(
        f"/api/files/{rid}", json={"titel": "Verloren"}, headers={**alice.auth, "If-Match": stale}
    )
    assert refused.status_code == 412
    assert "changed" in refused.get_json()["message"]
    assert api.get(f"/api/files/{rid}", alice).get_json()["titel"] == "Zwischen"
    # A weak tag never matches (strong comparison).
    weak = api.client.patch(
        f"/api/files/{rid}",
        json={"titel": "Schwach"},
        headers={**alice.auth, "If-Match": f"W/{fresh}"},
    )
    assert weak.status_code == 412

    accepted = api.client.patch(
        f"/api/files/{rid}",
        json={"titel": "Neu"},
        headers={**alice.auth, "If-Match": f'"other", {fresh}'},
    )
    assert accepted.status_code == 200
    assert api.get(f"/api/files/{rid}", alice).get_json()["titel"] == "Neu"
    star = api.client.patch(
        f"/api/files/{rid}", json={"titel": "Stern"}, headers={**alice.auth, "If-Match": "*"}
    )
    assert star.status_code == 200


def test_replace_with_a_stale_if_match_is_412_and_changes_nothing(api: Api, alice: Account):
    rid = api.create(alice, "a.txt", V1)["id"]
    stale = api.get(f"/api/files/{rid}", alice).headers["ETag"]
    api.patch(rid, alice, {"titel": "Zwischen"})
    before = api.row(rid)

    refused = api.replace(alice, rid, "b.txt", V2, headers={"If-Match": stale})
    assert refused.status_code == 412
    after = api.row(rid)
    assert (after.version, after.stored_path, after.updated_at) == (
        1,
        before.stored_path,
        before.updated_at,
    )
    assert api.objects() == {before.stored_path}
    assert version_rows(api, rid) == []

    fresh = api.get(f"/api/files/{rid}", alice).headers["ETag"]
    accepted = api.replace(alice, rid, "b.txt", V2, headers={"If-Match": fresh})
    assert accepted.status_code == 200 and accepted.get_json()["version"] == 2


# --- kept released versions -------------------------------------------------------------


def test_released_versions_are_kept_and_downloadable(
    api: Api, alice: Account, bob: Account, admin: Account
):
    keep(api, True)
    rid = api.create(alice, "a.txt", V1)["id"]  # released, no embargo: public at once
    api.replace(alice, rid, "b.txt", V2, change_note="Zahlen korrigiert")
    rows = version_rows(api, rid)
    assert [(r.number, r.stored_path is not None) for r in rows] == [(1, True)]
    assert api.objects() == {api.row(rid).stored_path, rows[0].stored_path}
    assert api.object_bytes(rows[0].stored_path) == V1

    listed = api.get(f"/api/files/{rid}/versions", alice).get_json()["data"]
    assert [(v["number"], v["kept"]) for v in listed] == [(1, True)]

    for door, account in (
        ("/api/files", alice),
        ("/api/files", admin),
        ("/api/public/files", None),
    ):
        whole = api.get(f"{door}/{rid}/versions/1/download", account)
        assert whole.status_code == 200, door
        assert whole.data == V1
        assert whole.headers["ETag"] == f'"{sha(V1)}"'
        assert whole.headers["Content-Type"] == "text/plain"
        assert "a.txt" in whole.headers["Content-Disposition"]
        part = api.get(f"{door}/{rid}/versions/1/download", account, headers={"Range": "bytes=0-4"})
        assert (part.status_code, part.data) == (206, V1[:5])
        cached = api.get(
            f"{door}/{rid}/versions/1/download", account, headers={"If-None-Match": f'"{sha(V1)}"'}
        )
        assert cached.status_code == 304
    assert api.get(f"/api/files/{rid}/versions/1/download", bob).status_code == 404
    assert api.get(f"/api/files/{rid}/versions/2/download", alice).status_code == 404
    assert api.get(f"/api/public/files/{rid}/versions/7/download").status_code == 404
    # The current version is not an ended one.
    assert api.get(f"/api/files/{rid}/download", alice).data == V2

    # Unreleased: the public door closes; under embargo it says why.
    api.patch(rid, alice, {"freigabe": False})
    assert api.get(f"/api/public/files/{rid}/versions/1/download").status_code == 404
    future = (date.today() + timedelta(days=30)).isoformat()
    api.patch(rid, alice, {"freigabe": True, "sperrfrist": future})
    assert api.get(f"/api/public/files/{rid}/versions/1/download").status_code == 403

    # Deleting the record deletes every version's content.
    assert api.delete(rid, alice).status_code == 204
    assert api.objects() == set()
    assert version_rows(api, rid) == []
    with api.app.app_context():
        assert db.session.scalars(select(PendingObjectDeletion)).all() == []


def test_never_public_content_is_deleted_even_when_keeping(
    api: Api, alice: Account, admin: Account
):
    keep(api, True)
    future = (date.today() + timedelta(days=30)).isoformat()
    unreleased = api.create(alice, "a.txt", V1, freigabe="false")["id"]
    embargoed = api.create(alice, "b.txt", V1, sperrfrist=future)["id"]
    for rid in (unreleased, embargoed):
        assert api.replace(alice, rid, "b.txt", V2).status_code == 200
        [row] = version_rows(api, rid)
        assert row.stored_path is None
        assert api.get(f"/api/files/{rid}/versions/1/download", admin).status_code == 404
    assert api.objects() == {api.row(unreleased).stored_path, api.row(embargoed).stored_path}


def test_content_public_for_a_while_stays_kept(api: Api, alice: Account, admin: Account):
    """Released, then withdrawn before the replacement: it was public, so it is kept."""
    keep(api, True)
    rid = api.create(alice, "a.txt", V1)["id"]
    api.patch(rid, alice, {"freigabe": False})
    api.replace(alice, rid, "b.txt", V2)
    api.replace(alice, rid, "c.txt", V3)  # version 2 was never public
    rows = version_rows(api, rid)
    assert [(r.number, r.stored_path is not None) for r in rows] == [(1, True), (2, False)]
    assert api.get(f"/api/files/{rid}/versions/1/download", admin).data == V1


def test_an_embargo_that_ended_made_the_content_public(api: Api, alice: Account):
    keep(api, True)
    future = (date.today() + timedelta(days=30)).isoformat()
    rid = api.create(alice, "a.txt", V1, sperrfrist=future)["id"]
    api.set_columns(rid, sperrfrist=date.today() - timedelta(days=1))  # the day came
    api.replace(alice, rid, "b.txt", V2)
    assert version_rows(api, rid)[0].stored_path is not None


def test_keeping_off_deletes_released_content_as_the_specification_says(api: Api, alice: Account):
    rid = api.create(alice, "a.txt", V1)["id"]
    api.replace(alice, rid, "b.txt", V2)
    assert version_rows(api, rid)[0].stored_path is None
    assert api.objects() == {api.row(rid).stored_path}
    assert api.get(f"/api/public/files/{rid}/versions/1/download").status_code == 404


def test_a_binary_version_downloads_with_its_own_type(api: Api, alice: Account):
    keep(api, True)
    pdf = samples.pdf_bytes()
    rid = api.create(alice, "a.pdf", pdf)["id"]
    api.replace(alice, rid, "b.txt", V2)
    old = api.get(f"/api/public/files/{rid}/versions/1/download")
    assert (old.headers["Content-Type"], old.data) == ("application/pdf", pdf)


# --- the other doors serve the current version -----------------------------------------


def test_share_links_and_the_folder_zip_serve_the_current_version(
    api: Api, alice: Account, tmp_path
):
    keep(api, True)
    rid = api.create(alice, "bericht.txt", V1, path="presse")["id"]
    link = api.client.post(
        f"/api/files/{rid}/links",
        json={"expires_at": (date.today() + timedelta(days=2)).isoformat() + "T00:00:00Z"},
        headers=alice.auth,
    )
    assert link.status_code == 201, link.get_json()
    secret = link.get_json()["url"].rsplit("/", 1)[1]
    assert api.client.get(f"/api/shared/{secret}/files/{rid}/download").data == V1

    assert api.replace(alice, rid, "bericht.txt", V2).status_code == 200
    assert api.client.get(f"/api/shared/{secret}/files/{rid}/download").data == V2
    for response in (
        api.get("/api/files.zip?path=presse", alice),
        api.client.get("/api/public/files.zip?path=presse"),
    ):
        assert response.status_code == 200
        with zipfile.ZipFile(io.BytesIO(response.get_data())) as archive:
            contents = [archive.read(name) for name in archive.namelist()]
        assert V2 in contents and V1 not in contents


def test_an_upload_through_tus_is_version_1_and_replaced_like_any_other(api: Api, alice: Account):
    created = api.client.post(
        "/api/uploads",
        headers={
            "Tus-Resumable": "1.0.0",
            **alice.auth,
            "Upload-Length": str(len(V1)),
            "Upload-Metadata": "filename " + base64.b64encode(b"tus.txt").decode(),
        },
    )
    assert created.status_code == 201
    done = api.client.patch(
        created.headers["Location"],
        data=V1,
        headers={"Tus-Resumable": "1.0.0", **alice.auth, "Upload-Offset": "0"},
        content_type="application/offset+octet-stream",
    )
    assert done.status_code == 204
    rid = done.headers["Upload-Record-Id"]
    assert api.get(f"/api/files/{rid}", alice).get_json()["version"] == 1
    assert api.replace(alice, rid, "tus.txt", V2).get_json()["version"] == 2
    assert [r.number for r in version_rows(api, rid)] == [1]
