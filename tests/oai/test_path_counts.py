"""`file_path_counts` keeps no row at zero (migration 0012): moving records between paths
cannot grow the table the set list and the list totals read."""

from __future__ import annotations

from sqlalchemy import select

from app.extensions import db
from app.models import FilePathCount
from tests.support.api import Account, Api


def counts(api: Api) -> dict[tuple[str, bool], int]:
    with api.app.app_context():
        rows = db.session.execute(
            select(FilePathCount.path, FilePathCount.freigabe, FilePathCount.n)
        )
        return {(path, freigabe): n for path, freigabe, n in rows}


def test_a_path_left_by_every_record_is_forgotten(api: Api, alice: Account):
    first = api.create(alice, "a.pdf", path="a")
    second = api.create(alice, "b.pdf", path="a")
    for index in range(5):
        assert api.patch(first["id"], alice, {"path": f"moved/{index}"}).status_code == 200
    assert counts(api) == {("a", True): 1, ("moved/4", True): 1}
    assert api.patch(second["id"], alice, {"freigabe": False}).status_code == 200
    assert counts(api) == {("a", False): 1, ("moved/4", True): 1}
    assert api.delete(second["id"], alice).status_code == 204
    assert api.delete(first["id"], alice).status_code == 204
    assert counts(api) == {}
    listed = api.get("/api/files", alice, query_string={"path": "moved"}).get_json()
    assert listed["total"] == 0 and listed["data"] == []
