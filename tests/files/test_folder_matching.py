"""Folder matching is case-sensitive and exact on both databases (issue 36, finding 1 and
requirement 2): wherever a folder or a path prefix decides what is reached (press kits, lists,
ZIPs, the browse pages, OAI-PMH sets), paths that differ by case, by Unicode normalisation or
by `%`, `_` and `\\` are different folders. Paths are compared as stored, code point by code
point: the service does not normalise them (VirtualPath admits ASCII only, so a record written
through the API has no other form; one imported by SQL keeps its own)."""

from __future__ import annotations

import io
import zipfile
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import html
from sqlalchemy import delete, select, text

from app.database import sqlite_pragmas
from app.extensions import db
from app.files.listing import filtered
from app.models import FileRecord, ShareLink
from app.schemas.field_types import PATH_SEGMENT
from tests.files.test_visibility_properties import Spec, insert, remove_all
from tests.oai.test_oai import NS, oai
from tests.support.api import Account, Api

TOMORROW = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


def spec(path: str, *, owner: int = 0, freigabe: bool = True) -> Spec:
    return Spec(owner, freigabe, None, path, None, None)


def kit(api: Api, creator: Account, folder: str) -> str:
    body = {"path": folder, "expires_at": TOMORROW}
    response = api.client.post("/api/links", json=body, headers=creator.auth)
    assert response.status_code == 201, response.get_json()
    return response.get_json()["url"].rsplit("/", 1)[1]


def zip_count(response) -> int:
    """The archive's files, its manifest not counted."""
    assert response.status_code == 200, response.get_data()
    return len(zipfile.ZipFile(io.BytesIO(response.data)).namelist()) - 1


def test_a_press_kit_does_not_reach_a_folder_that_differs_only_in_case(
    api: Api, alice: Account, bob: Account, admin: Account
):
    """The finding: an administrator's kit for `presse/2026` listed `Presse/2026/intern/...`
    (another user's unreleased record) and put it in the ZIP, on SQLite."""
    ids = insert(
        api,
        [alice, bob, admin],
        [spec("presse/2026/a"), spec("Presse/2026/intern/x", owner=1, freigabe=False)],
    )
    try:
        secret = kit(api, admin, "presse/2026")
        listed = api.client.get(f"/api/shared/{secret}").get_json()["data"]
        assert [r["id"] for r in listed] == [ids[0]]
        assert api.client.get(f"/api/shared/{secret}/files/{ids[1]}").status_code == 404
        download = api.client.get(f"/api/shared/{secret}/files/{ids[1]}/download")
        assert download.status_code == 404
        assert zip_count(api.client.get(f"/api/shared/{secret}/files.zip")) == 1
        # The administrator's own list and ZIP filtered by the path: a prefix, with its case.
        own = api.get("/api/files", admin, query_string={"path": "presse/"}).get_json()
        assert [r["id"] for r in own["data"]] == [ids[0]]
        assert zip_count(api.get("/api/files.zip?path=presse/", admin)) == 1
    finally:
        with api.app.app_context():
            db.session.execute(delete(ShareLink))
            db.session.commit()
        remove_all(api)


def test_a_press_kit_does_not_reach_a_folder_that_differs_only_by_an_underscore(
    api: Api, alice: Account
):
    """`_`, the one LIKE wildcard a folder name the API admits may hold, is a character: a kit
    for `presse/2026_12` does not reach `presse/2026-12`."""
    inside = api.create(alice, "in.pdf", path="presse/2026_12/teil", freigabe=0)
    api.create(alice, "daneben.pdf", path="presse/2026-12/teil", freigabe=0)
    page = api.client.get(f"/api/shared/{kit(api, alice, 'presse/2026_12')}").get_json()
    assert ([r["id"] for r in page["data"]], page["total"]) == ([inside["id"]], 1)


# Top folders that differ only by case, by Unicode normalisation (NFC "é", NFD "e" + U+0301)
# or where LIKE's `_`, `%` and escape `\` stand for a letter.
ROOTS = ["presse", "Presse", "PRESSE", "pre_se", "pre%se", "pre\\se", "caf\u00e9", "cafe\u0301"]
PATHS = [f"{root}{tail}" for root in ROOTS for tail in ("", "/2026", "/2026/intern")]
# What a list's `path` (a plain prefix) may be, beside the folders: ends and wildcards.
PREFIXES = ["pre", "pres", "pre_", "pre%", "pre\\", "pre\\s", "caf", "cafe", "Presse/"]

records = st.lists(
    st.builds(spec, st.sampled_from(PATHS), freigabe=st.booleans()), min_size=1, max_size=6
)


def in_folder(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + "/")


def is_folder(text: str) -> bool:
    """A folder the API admits for a kit and the browse pages show (ASCII segments)."""
    return all(PATH_SEGMENT.fullmatch(part) for part in text.split("/"))


def identifiers(api: Api, folder: str) -> set[str]:
    root = oai(api, verb="ListIdentifiers", metadataPrefix="oai_dc", set=folder.replace("/", ":"))
    found = {e.text.rsplit(":", 1)[1] for e in root.iterfind(".//oai:header/oai:identifier", NS)}
    assert root.find(".//oai:resumptionToken", NS) is None  # all on one page
    return found


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    stored=records,
    folder=st.sampled_from([p for p in PATHS if "2026/" not in p]),
    prefix=st.sampled_from(PATHS + PREFIXES),
)
def test_folders_match_exactly_wherever_a_folder_decides_access(
    api: Api,
    alice: Account,
    bob: Account,
    admin: Account,
    stored: list[Spec],
    folder: str,
    prefix: str,
) -> None:
    ids = insert(api, [alice, bob, admin], stored)
    try:
        released = {i: s.path for i, s in zip(ids, stored, strict=True) if s.freigabe}
        every = {i: s.path for i, s in zip(ids, stored, strict=True)}

        # A list's path and a ZIP's: a plain prefix, character for character.
        expected = {i for i, path in released.items() if path.startswith(prefix)}
        listed = api.client.get("/api/public/files", query_string={"path": prefix, "per_page": 50})
        assert {r["id"] for r in listed.get_json()["data"]} == expected
        archive = api.client.get("/api/public/files.zip", query_string={"path": prefix})
        assert zip_count(archive) == len(expected)
        own = api.get("/api/files", admin, query_string={"path": prefix, "per_page": 50})
        assert {r["id"] for r in own.get_json()["data"]} == {
            i for i, path in every.items() if path.startswith(prefix)
        }

        # An OAI-PMH set: the folder and below it.
        inside = {i for i, path in released.items() if in_folder(path, folder)}
        if is_folder(folder):
            assert identifiers(api, folder) == inside
        if not is_folder(folder):
            return  # a kit or a folder page names ASCII folders only

        # A folder page: its records, its sub-folders, or 404 when it holds nothing released.
        page = api.client.get(f"/browse/{folder}")
        assert page.status_code == (200 if inside else 404)
        if inside:
            document = html.fromstring(page.get_data())
            shown = document.xpath("//ol[@class='records']/li/a")
            assert len(shown) == sum(1 for i in inside if released[i] == folder)
            children = set(document.xpath("//ul[@class='folders']/li/a/text()"))
            assert children == {released[i][len(folder) + 1 :].split("/")[0] for i in inside} - {""}

        # An administrator's kit: every record in the folder, whoever's, released or not.
        secret = kit(api, admin, folder)
        reached = {i for i, path in every.items() if in_folder(path, folder)}
        listed = api.client.get(f"/api/shared/{secret}").get_json()["data"]
        assert {r["id"] for r in listed} == reached
        assert zip_count(api.client.get(f"/api/shared/{secret}/files.zip")) == len(reached)
        for record_id in ids:
            response = api.client.get(f"/api/shared/{secret}/files/{record_id}/download")
            assert response.status_code == (200 if record_id in reached else 404)
    finally:
        with api.app.app_context():
            db.session.execute(delete(ShareLink))
            db.session.commit()
        remove_all(api)


def test_on_sqlite_a_path_prefix_is_case_sensitive_and_reads_the_path_index(make_sqlite_app):
    """The fix: LIKE compares case on every connection, and with the index's BINARY collation
    a prefix LIKE is a range read of ix_file_records_path (a scan before). PostgreSQL's LIKE
    always compared case."""
    app = make_sqlite_app()
    with app.app_context():
        assert db.session.scalar(text("SELECT 'presse' LIKE 'Presse'")) == 0
        query = filtered(select(FileRecord.id), {"path": "presse/2026"})
        compiled = query.compile(db.engine, compile_kwargs={"literal_binds": True})
        plan = db.session.execute(text(f"EXPLAIN QUERY PLAN {compiled}")).all()
        assert any("ix_file_records_path (path>? AND path<?)" in row[-1] for row in plan), plan


def test_a_sqlite_that_ignores_the_pragma_is_refused():
    """The pragma is deprecated; a build without it would silently match in any case."""

    class Cursor:
        def execute(self, statement: str) -> None:
            pass

        def fetchone(self) -> tuple[int]:
            return (1,)  # 'a' LIKE 'A'

        def close(self) -> None:
            pass

    class Connection:
        def cursor(self) -> Cursor:
            return Cursor()

    with pytest.raises(RuntimeError, match="case_sensitive_like"):
        sqlite_pragmas(Connection(), None)
