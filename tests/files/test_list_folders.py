"""Folder counts (kept by database triggers) and the ways path-filtered lists are read.

Lists take their `total` from `file_path_counts` and, on PostgreSQL, read a path prefix folder
by folder or match by match instead of walking every record in date order. Whatever way is
taken, the pages must be exactly those of the plain query.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.files import listing as services
from app.models import FilePathCount, FileRecord, UserFileCount
from tests.files.test_list import follow_cursors, insert_rows, listing
from tests.support import samples
from tests.support.api import Account, Api

#: Paths that begin like `reports/` without being under it.
PREFIX_DISTRACTORS = ["reports", "reports2", "reportsX/b", "reports2/a/b"]


def folder_counts(api: Api) -> dict[tuple[str, bool], int]:
    with api.app.app_context():
        rows = db.session.execute(
            sa.select(FilePathCount.path, FilePathCount.freigabe, FilePathCount.n)
        )
        return {(path, freigabe): n for path, freigabe, n in rows if n}


def counted_from_records(api: Api) -> dict[tuple[str, bool], int]:
    with api.app.app_context():
        key = sa.func.coalesce(FileRecord.path, "")
        rows = db.session.execute(
            sa.select(key, FileRecord.freigabe, sa.func.count()).group_by(key, FileRecord.freigabe)
        )
        return {(path, freigabe): n for path, freigabe, n in rows}


def owner_counts(api: Api) -> dict[int, int]:
    with api.app.app_context():
        rows = db.session.execute(sa.select(UserFileCount.user_id, UserFileCount.n))
        return {user_id: n for user_id, n in rows if n}


def owned_from_records(api: Api) -> dict[int, int]:
    with api.app.app_context():
        rows = db.session.execute(
            sa.select(FileRecord.user_id, sa.func.count()).group_by(FileRecord.user_id)
        )
        return dict(rows.all())


def test_folder_counts_follow_every_change(api: Api, alice: Account, admin: Account):
    first = api.upload(
        alice,
        [("a.pdf", samples.pdf_bytes()), ("b.pdf", samples.pdf_bytes())],
        path="reports/2019/q1",
    ).get_json()["files"]
    unpathed = api.create(alice, "c.pdf")
    hidden = api.create(alice, "d.pdf", path="reports/2019/q2", freigabe="0")
    assert folder_counts(api) == {
        ("reports/2019/q1", True): 2,
        ("", True): 1,
        ("reports/2019/q2", False): 1,
    }

    assert api.patch(first[0]["id"], alice, {"path": "reports/2020"}).status_code == 200
    assert api.patch(hidden["id"], alice, {"freigabe": True}).status_code == 200
    assert api.patch(unpathed["id"], alice, {"titel": "no path change"}).status_code == 200
    assert api.replace(alice, first[1]["id"], "new.pdf", samples.pdf_bytes()).status_code == 200
    assert api.delete(unpathed["id"], alice).status_code == 204
    expected = {
        ("reports/2020", True): 1,
        ("reports/2019/q1", True): 1,
        ("reports/2019/q2", True): 1,
    }
    assert folder_counts(api) == expected == counted_from_records(api)
    assert owner_counts(api) == {alice.id: 3} == owned_from_records(api)
    api.create(admin, "e.pdf", path="admin/own")
    assert owner_counts(api) == {alice.id: 3, admin.id: 1} == owned_from_records(api)
    assert listing(api, alice)["total"] == 3
    assert listing(api, alice, path="reports/2019")["total"] == 2

    # The totals users see come from these counts.
    assert listing(api, admin)["total"] == 4
    assert listing(api, admin, path="reports/2019")["total"] == 2
    assert listing(api, admin, path="reports/2019", freigabe="0")["total"] == 0
    assert api.client.get("/api/public/files?path=reports/20").get_json()["total"] == 3
    assert listing(api, admin, cursor="", path="reports/2019")["next_cursor"] is None

    with api.app.app_context():
        if db.engine.dialect.name == "postgresql":
            db.session.execute(sa.text("TRUNCATE file_records CASCADE"))
        else:
            db.session.execute(sa.delete(FileRecord))
        db.session.commit()
    assert folder_counts(api) == {} and owner_counts(api) == {}
    assert listing(api, admin)["total"] == 0 and listing(api, alice)["total"] == 0


def insert(api: Api, owner: Account, rows: list[tuple[datetime, str, bool]]) -> list[str]:
    """Records (created_at, path, freigabe) written directly, without objects."""
    return insert_rows(
        api, owner, [{"created_at": c, "path": p, "freigabe": f} for c, p, f in rows]
    )


@pytest.fixture
def folders(api: Api, alice: Account) -> list[str]:
    """720 released records in 6 folders under reports/, with interleaved dates, some equal;
    others beside them, unreleased, or in folders whose names begin like it (`reports2`).
    Returns the ids under reports/ in list order."""
    start = datetime(2024, 1, 1, tzinfo=UTC)
    rows = []
    for n, (folder, count) in enumerate(
        [("q1", 400), ("q2", 150), ("q3", 100), ("q4", 50), ("r", 15), ("s", 5)]
    ):
        # Pairs share a timestamp; each folder advances at its own pace.
        rows += [
            (start + timedelta(minutes=(n + 1) * (i // 2)), f"reports/{folder}", True)
            for i in range(count)
        ]
    ids = insert(api, alice, rows)
    insert(api, alice, [(start + timedelta(days=400), "report", True)] * 40)
    insert(api, alice, [(start + timedelta(days=400), "reports/q1", False)] * 30)
    # Paths that only begin like the folder, dated among its records.
    for n, name in enumerate(PREFIX_DISTRACTORS):
        insert(api, alice, [(start + timedelta(minutes=7 * i + n), name, True) for i in range(10)])
    ordered = sorted(zip(rows, ids, strict=True), key=lambda p: (p[0][0], p[1]), reverse=True)
    return [record_id for _, record_id in ordered]


@pytest.mark.parametrize("budget", [0, services.READ_BUDGET])
def test_path_lists_give_the_plain_pages_however_they_are_read(
    api: Api, admin: Account, folders: list[str], monkeypatch: pytest.MonkeyPatch, budget: int
):
    ways: list[str] = []
    by_folder, all_matches = services._newest_per_folder, services._all_matches
    monkeypatch.setattr(services, "READ_BUDGET", budget)
    monkeypatch.setattr(
        services, "_newest_per_folder", lambda *a: ways.append("folder") or by_folder(*a)
    )
    monkeypatch.setattr(
        services, "_all_matches", lambda *a: ways.append("matches") or all_matches(*a)
    )

    pages = [listing(api, admin, path="reports/", freigabe="1", page=n) for n in (1, 2, 3, 8, 9)]
    assert [p["total"] for p in pages] == [720] * 5
    assert [r["id"] for p in pages[:3] for r in p["data"]] == folders[:300]
    assert [r["id"] for r in pages[3]["data"]] == folders[700:]
    assert pages[4]["data"] == []
    walked = follow_cursors(api, admin, path="reports/", freigabe="1")
    assert [i for page in walked for i in page] == folders

    public = api.client.get("/api/public/files?path=reports/&page=2").get_json()
    assert public["total"] == 720
    assert [r["id"] for r in public["data"]] == folders[100:200]

    with api.app.app_context():
        dialect = db.engine.dialect.name
    if budget == 0 or dialect != "postgresql":
        assert ways == []
    else:
        # 6 folders x 100 (page 1) fits in 720 records; deeper pages read the matches.
        assert "folder" in ways and "matches" in ways


def test_a_prefix_counts_only_the_records_it_lists(api: Api, alice: Account, admin: Account):
    """`path=reports/` is a plain prefix: `reports2`, `reportsX/b` and `reports` itself are
    not under it, neither in the records listed nor in `total` and `last_page`."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    [inside] = insert(api, alice, [(start, "reports/a", True)])
    hidden = insert(api, alice, [(start, "reports/a", False)])
    beside = insert(
        api,
        alice,
        [(start + timedelta(seconds=n), path, True) for n, path in enumerate(PREFIX_DISTRACTORS)],
    )

    lists = {
        "public": lambda **q: api.client.get("/api/public/files", query_string=q).get_json(),
        "admin": lambda **q: listing(api, admin, **q),
        "own": lambda **q: listing(api, alice, **q),
    }
    for name, read in lists.items():
        body = read(path="reports/")
        expected = [inside] if name == "public" else sorted([inside, *hidden], reverse=True)
        assert sorted((r["id"] for r in body["data"]), reverse=True) == expected, name
        assert body["total"] == len(expected) and body["last_page"] == 1, name
        assert read(path="reports/", freigabe="1")["total"] == 1, name
        assert read(path="reports")["total"] == len(expected) + len(beside), name
        walked = read(path="reports/", cursor="")
        assert {r["id"] for r in walked["data"]} == set(expected), name


def test_a_prefix_with_like_wildcards_counts_them_literally(
    api: Api, alice: Account, admin: Account
):
    start = datetime(2026, 1, 1, tzinfo=UTC)
    [literal] = insert(api, alice, [(start, "pct_%/a", True)])
    insert(api, alice, [(start, "pctXY/a", True), (start, "pct_XY/a", True)])
    for body in (
        api.client.get("/api/public/files", query_string={"path": "pct_%"}).get_json(),
        listing(api, admin, path="pct_%"),
    ):
        assert [r["id"] for r in body["data"]] == [literal]
        assert body["total"] == 1


def counting_statements(api: Api) -> list[str]:
    """Collects the statements that count file_records rows one by one."""
    seen: list[str] = []
    with api.app.app_context():
        engine = db.engine

    @sa.event.listens_for(engine, "before_cursor_execute")
    def record(_conn, _cursor, statement, *_args) -> None:
        if "count(" in statement.lower() and "FROM file_records" in statement:
            seen.append(statement)

    return seen


def test_totals_are_read_from_the_counts_not_counted(api: Api, alice: Account, admin: Account):
    """What `services.paginate` promises: where the folder or owner counts describe a list,
    its total is read from them (a few rows), not counted over every matching record."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    insert(api, alice, [(start, "reports/a", True), (start, "reports/a", False)])
    insert(api, alice, [(start, "other", True)])
    counted = counting_statements(api)

    def public(**params):
        return api.client.get("/api/public/files", query_string=params).get_json()

    read_from_counts = [
        (lambda: listing(api, admin), 3),
        (lambda: listing(api, admin, path="reports/"), 2),
        (lambda: listing(api, admin, path="reports/", freigabe="1"), 1),
        (lambda: listing(api, admin, freigabe="0"), 1),
        (lambda: public(), 2),
        (lambda: public(path="reports/"), 1),
        (lambda: listing(api, alice), 3),
    ]
    for n, (read, total) in enumerate(read_from_counts):
        assert read()["total"] == total, n
        assert counted == [], n
    # Other filters, and own lists with filters, are counted (and seen counted here).
    assert listing(api, admin, aktiv_id="X")["total"] == 0 and len(counted) == 1
    assert listing(api, alice, path="reports/")["total"] == 2 and len(counted) == 2
