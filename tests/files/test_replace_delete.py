"""Content replacement and deletion, and the order of their side effects."""

from __future__ import annotations

import io

from tests.support import samples
from tests.support.api import RECORD_FIELDS, Account, Api, parse_timestamp


def test_replace_keeps_identity_and_metadata(api: Api, alice: Account):
    record = api.create(
        alice, "v1.pdf", titel="Bericht", path="a/b", reihenfolge="4", freigabe="true"
    )
    old_key = api.row(record["id"]).stored_path
    new_data = samples.png_bytes()

    response = api.replace(alice, record["id"], "v2.png", new_data)
    assert response.status_code == 200
    body = response.get_json()
    assert list(body) == RECORD_FIELDS
    assert body["id"] == record["id"]
    assert body["created_at"] == record["created_at"]
    assert parse_timestamp(body["updated_at"]) > parse_timestamp(record["created_at"])
    assert (body["original_name"], body["mime_type"], body["size"]) == (
        "v2.png",
        "image/png",
        len(new_data),
    )
    assert (body["titel"], body["path"], body["reihenfolge"]) == ("Bericht", "a/b", 4)

    row = api.row(record["id"])
    assert row.user_id == alice.id
    assert row.stored_path != old_key and row.stored_path.startswith(f"files/{record['id']}/")
    assert api.objects() == {row.stored_path}
    download = api.get(f"/api/files/{record['id']}/download", alice)
    assert download.data == new_data
    assert download.headers["Content-Type"] == "image/png"


def test_replace_with_a_disallowed_type_keeps_the_old_content(api: Api, alice: Account):
    data = samples.pdf_bytes()
    record = api.create(alice, data=data)
    before = api.row(record["id"])

    response = api.replace(alice, record["id"], "evil.pdf", b"<html><script>x</script></html>")
    assert response.status_code == 422
    assert list(response.get_json()["errors"]) == ["file"]
    after = api.row(record["id"])
    assert (after.stored_path, after.updated_at, after.size) == (
        before.stored_path,
        before.updated_at,
        before.size,
    )
    assert api.objects() == {before.stored_path}
    assert api.get(f"/api/files/{record['id']}/download", alice).data == data


def test_replace_requires_the_file_part(api: Api, alice: Account):
    record = api.create(alice)
    response = api.client.post(
        f"/api/files/{record['id']}/content",
        data={"files[]": (io.BytesIO(b"hello\n"), "a.txt")},
        headers=alice.auth,
        content_type="multipart/form-data",
    )
    assert response.status_code == 422
    assert response.get_json()["errors"] == {"file": ["The file field is required."]}
    assert len(api.objects()) == 1


def test_replace_with_an_empty_file_is_422(api: Api, alice: Account):
    record = api.create(alice)
    response = api.replace(alice, record["id"], "empty.txt", b"")
    assert response.status_code == 422
    assert list(response.get_json()["errors"]) == ["file"]


def test_admin_may_replace_any_content(api: Api, alice: Account, admin: Account):
    record = api.create(alice, freigabe="false")
    response = api.replace(admin, record["id"], "n.txt", b"new text\n")
    assert response.status_code == 200
    assert api.row(record["id"]).user_id == alice.id


def test_delete_removes_row_and_object(api: Api, alice: Account):
    record = api.create(alice)
    keep = api.create(alice, "keep.pdf")
    response = api.delete(record["id"], alice)
    assert response.status_code == 204
    assert response.data == b""
    assert "Content-Type" not in response.headers
    assert api.get(f"/api/files/{record['id']}", alice).status_code == 404
    assert api.get(f"/api/files/{record['id']}/download", alice).status_code == 404
    assert api.delete(record["id"], alice).status_code == 404
    assert [str(r.id) for r in api.rows()] == [keep["id"]]
    assert api.objects() == {api.row(keep["id"]).stored_path}


def test_admin_may_delete_any_record(api: Api, alice: Account, admin: Account):
    record = api.create(alice, freigabe="false")
    assert api.delete(record["id"], admin).status_code == 204
    assert api.rows() == [] and api.objects() == set()
