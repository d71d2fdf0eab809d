from __future__ import annotations

import hashlib
import io
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from app import create_app
from app.extensions import db
from tests.support import samples
from tests.support.api import CREATE_FIELDS, Account, Api, parse_timestamp


def test_upload_one_file_returns_the_created_record(api: Api, alice: Account):
    before = datetime.now(UTC)
    data = samples.pdf_bytes()
    response = api.upload(alice, [("Jahresbericht 2025.pdf", data)], titel="Bericht")

    assert response.status_code == 201
    files = response.get_json()["files"]
    assert len(files) == 1
    record = files[0]
    assert list(record) == CREATE_FIELDS
    assert uuid.UUID(record["id"]).version == 4
    assert record["id"] == str(uuid.UUID(record["id"]))
    assert record["original_name"] == "Jahresbericht 2025.pdf"
    assert record["mime_type"] == "application/pdf"
    assert record["size"] == len(data)
    assert record["titel"] == "Bericht"
    assert record["reihenfolge"] == 0 and record["freigabe"] is True
    for name in (
        "aktiv_id",
        "path",
        "reprotyp",
        "beschreibung",
        "autoren",
        "sperrfrist",
        "sachschlagwoerter",
        "org_themen",
        "erstellt_von",
        "freigegeben_von",
    ):
        assert record[name] is None
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", record["created_at"])
    created = parse_timestamp(record["created_at"])
    assert before - timedelta(seconds=1) <= created <= datetime.now(UTC)

    row = api.row(record["id"])
    assert row.user_id == alice.id
    assert row.stored_path.startswith(f"files/{record['id']}/")
    assert "Jahresbericht" not in row.stored_path
    assert api.objects() == {row.stored_path}
    assert api.object_bytes(row.stored_path) == data


def test_metadata_applies_to_every_file(api: Api, alice: Account):
    files = [
        ("a.png", samples.png_bytes()),
        ("b.csv", samples.csv_bytes()),
        ("c.json", samples.json_bytes()),
    ]
    metadata = {
        "path": "reports/2025/q1",
        "aktiv_id": "AKT-7",
        "reprotyp": "Digitalisat",
        "titel": "Titel",
        "beschreibung": "Beschreibung",
        "autoren": "A. Autor",
        "sachschlagwoerter": "Klima; Energie",
        "org_themen": "Umwelt",
        "sperrfrist": "2030-01-31",
        "reihenfolge": "-5",
        "freigabe": "false",
        "erstellt_von": "Referat 1",
        "freigegeben_von": "Leitung",
    }
    response = api.upload(alice, files, **metadata)

    assert response.status_code == 201
    records = response.get_json()["files"]
    assert [r["original_name"] for r in records] == ["a.png", "b.csv", "c.json"]
    assert [r["mime_type"] for r in records] == ["image/png", "text/csv", "application/json"]
    expected = {**metadata, "reihenfolge": -5, "freigabe": False}
    for record in records:
        assert {k: record[k] for k in metadata} == expected
    assert len({r["id"] for r in records}) == 3
    assert len(api.objects()) == 3


def test_twenty_five_files_in_one_request(api: Api, alice: Account):
    files = [(f"note-{i}.txt", f"Notiz {i}\n".encode()) for i in range(25)]
    response = api.upload(alice, files)
    assert response.status_code == 201
    assert len(response.get_json()["files"]) == 25
    assert len(api.rows()) == 25 and len(api.objects()) == 25


def test_twenty_six_files_are_rejected_and_nothing_is_kept(api: Api, alice: Account):
    files = [(f"note-{i}.txt", b"text\n") for i in range(26)]
    response = api.upload(alice, files)
    assert response.status_code == 422
    body = response.get_json()
    assert body["errors"] == {"files": ["The files field must not have more than 25 items."]}
    assert api.rows() == [] and api.objects() == set()


def test_no_file_is_rejected(api: Api, alice: Account):
    response = api.upload(alice, [], titel="nur Metadaten")
    assert response.status_code == 422
    assert response.get_json() == {
        "message": "The files field is required.",
        "errors": {"files": ["The files field is required."]},
    }


def test_a_body_that_is_not_multipart_is_rejected(api: Api, alice: Account):
    response = api.client.post("/api/files", json={"titel": "x"}, headers=alice.auth)
    assert response.status_code == 422
    assert list(response.get_json()["errors"]) == ["files"]


@pytest.mark.parametrize("field", ["files[]", "files", "files[0]"])
def test_file_part_names_laravel_clients_send(api: Api, alice: Account, field: str):
    response = api.upload(alice, [("a.txt", b"hello\n")], field=field)
    assert response.status_code == 201


def test_one_bad_file_rejects_the_whole_request(api: Api, alice: Account):
    files = [
        ("ok.pdf", samples.pdf_bytes()),
        ("page.html", b"<!DOCTYPE html><html><body>hi</body></html>"),
        ("ok.png", samples.png_bytes()),
    ]
    response = api.upload(alice, files)
    assert response.status_code == 422
    errors = response.get_json()["errors"]
    assert list(errors) == ["files.1"]
    assert errors["files.1"][0].startswith("The files.1 field must be a file of type: pdf, txt")
    assert api.rows() == [] and api.objects() == set()


def test_empty_file_is_rejected(api: Api, alice: Account):
    response = api.upload(alice, [("empty.txt", b"")])
    assert response.status_code == 422
    assert list(response.get_json()["errors"]) == ["files.0"]
    assert api.objects() == set()


def test_type_comes_from_the_bytes_not_the_client(api: Api, alice: Account):
    response = api.upload(
        alice,
        [("picture.txt", samples.png_bytes()), ("report.txt", samples.pdf_bytes())],
        content_types=["text/plain", "text/html"],
    )
    assert response.status_code == 201
    assert [r["mime_type"] for r in response.get_json()["files"]] == [
        "image/png",
        "application/pdf",
    ]


def test_client_folders_are_stripped_from_the_name(api: Api, alice: Account):
    response = api.upload(alice, [("../../home/me/notes.txt", b"hi\n")])
    assert response.status_code == 201
    assert response.get_json()["files"][0]["original_name"] == "notes.txt"


def test_unknown_form_fields_are_ignored(api: Api, alice: Account):
    response = api.upload(alice, [("a.txt", b"hi\n")], unknown="x", user_id="99", size="1")
    assert response.status_code == 201
    record = response.get_json()["files"][0]
    assert record["size"] == 3
    assert api.row(record["id"]).user_id == alice.id


def test_string_fields_are_trimmed_and_empty_means_null(api: Api, alice: Account):
    record = api.create(alice, titel="  Titel  ", autoren="   ", path="")
    assert record["titel"] == "Titel"
    assert record["autoren"] is None
    assert record["path"] is None


@pytest.mark.parametrize(
    "value,expected",
    [("true", True), ("TRUE", True), ("1", True), ("false", False), ("False", False), ("0", False)],
)
def test_freigabe_values(api: Api, alice: Account, value: str, expected: bool):
    assert api.create(alice, freigabe=value)["freigabe"] is expected


def test_limits_count_characters_not_bytes(api: Api, alice: Account):
    record = api.create(alice, beschreibung="ä" * 5000, titel="ß" * 255)
    assert len(record["beschreibung"]) == 5000 and len(record["titel"]) == 255


@pytest.mark.parametrize(
    "field,value",
    [
        ("path", "/leading"),
        ("path", "trailing/"),
        ("path", "a/../b"),
        ("path", ".."),
        ("path", "a//b"),
        ("path", "with space"),
        ("path", "umlaut/ä"),
        ("path", "a\\b"),
        ("path", "x" * 256),
        ("beschreibung", "x" * 5001),
        ("titel", "x" * 256),
        ("aktiv_id", "x" * 256),
        ("freigabe", "yes"),
        ("freigabe", "2"),
        ("freigabe", "on"),
        ("reihenfolge", "1.5"),
        ("reihenfolge", "abc"),
        ("reihenfolge", "2147483648"),
        ("reihenfolge", "-2147483649"),
        ("sperrfrist", "2026-02-30"),
        ("sperrfrist", "30.01.2026"),
        ("sperrfrist", "2026-1-5"),
        ("sperrfrist", "2026-01-05T00:00:00"),
    ],
)
def test_invalid_metadata_is_422_and_stores_nothing(
    api: Api, alice: Account, field: str, value: str
):
    response = api.upload(alice, [("a.txt", b"hello\n")], **{field: value})
    assert response.status_code == 422
    body = response.get_json()
    assert list(body["errors"]) == [field]
    assert body["message"] == body["errors"][field][0]
    assert api.rows() == [] and api.objects() == set()


def test_valid_edge_values(api: Api, alice: Account):
    record = api.create(
        alice,
        path="a/b.c/d_e-f/./g",
        reihenfolge="2147483647",
        sperrfrist="2028-02-29",
    )
    assert record["path"] == "a/b.c/d_e-f/./g"
    assert record["reihenfolge"] == 2147483647
    assert record["sperrfrist"] == "2028-02-29"


def test_several_errors_are_summarised_like_laravel(api: Api, alice: Account):
    response = api.upload(
        alice,
        [("a.txt", b"hello\n"), ("b.exe", b"MZ\x90\x00" + bytes(200))],
        path="/x",
        freigabe="maybe",
    )
    assert response.status_code == 422
    body = response.get_json()
    assert set(body["errors"]) == {"files.1", "path", "freigabe"}
    first = next(iter(body["errors"].values()))[0]
    assert body["message"] == f"{first} (and 2 more errors)"


def test_file_over_the_size_limit_is_422(api: Api, alice: Account, stack_config: dict):
    app = create_app({**stack_config, "MAX_FILE_SIZE": 2048})
    client = app.test_client()
    small_api = Api(app, client)
    ok = small_api.upload(alice, [("ok.txt", b"a" * 2048)])
    assert ok.status_code == 201
    response = small_api.upload(alice, [("ok.txt", b"a" * 10), ("big.txt", b"a" * 2049)])
    assert response.status_code == 422
    assert response.get_json()["errors"] == {
        "files.1": ["The files.1 field must not be greater than 2 kilobytes."]
    }
    assert len(small_api.rows()) == 1 and len(small_api.objects()) == 1
    with app.app_context():
        db.engine.dispose()


def test_stored_checksums_are_right_whatever_becomes_of_the_other_parts(api: Api, alice: Account):
    """Digests are computed while each part streams; parts that are empty, refused or beyond
    25 files leave nothing behind."""
    pdf, png = samples.pdf_bytes(), samples.png_bytes()
    stored = api.upload(alice, [("a.pdf", pdf), ("b.png", png)]).get_json()["files"]
    assert [api.row(r["id"]).checksum_sha256 for r in stored] == [
        hashlib.sha256(pdf).hexdigest(),
        hashlib.sha256(png).hexdigest(),
    ]
    refused = [("empty.pdf", b""), ("page.html", b"<html><body>x</body></html>")]
    assert api.upload(alice, [("ok.pdf", pdf), *refused]).status_code == 422
    assert api.upload(alice, [("f.pdf", pdf)] * 26).status_code == 422
    assert len(api.rows()) == 2 and len(api.objects()) == 2


def test_request_over_the_body_limit_is_413_before_reading(api: Api, alice: Account):
    limit = api.app.config["MAX_CONTENT_LENGTH"]
    assert limit == 25 * 200 * 1024 * 1024 + 1024 * 1024

    response = api.client.post(
        "/api/files",
        input_stream=io.BytesIO(b"--x\r\n"),
        headers={**alice.auth, "Content-Type": "multipart/form-data; boundary=x"},
        environ_overrides={"CONTENT_LENGTH": str(limit + 1)},
    )
    assert response.status_code == 413
    assert response.get_json() == {"message": "The request body is too large."}
    assert api.rows() == []


def test_upload_needs_a_token(api: Api):
    response = api.upload(None)
    assert response.status_code == 401
    assert api.rows() == [] and api.objects() == set()


def test_uploads_are_rate_limited_per_user(
    api: Api, alice: Account, bob: Account, stack_config: dict
):
    app = create_app({**stack_config, "RATELIMIT_ENABLED": True, "RATELIMIT_UPLOADS": "2/minute"})
    limited = Api(app, app.test_client())
    assert [limited.upload(alice, [("a.txt", b"x\n")]).status_code for _ in range(2)] == [201, 201]
    response = limited.upload(alice, [("a.txt", b"x\n")])
    assert response.status_code == 429
    assert "Retry-After" in response.headers
    assert limited.upload(bob, [("a.txt", b"x\n")]).status_code == 201
    assert len(limited.rows()) == 3
    with app.app_context():
        db.engine.dispose()
