"""Property tests: whatever the records, flags, embargo dates and filters, the public never sees
or receives an unreleased record, never receives an embargoed one, and a normal user never sees
another user's record."""

from __future__ import annotations

import io
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete

from app.extensions import db
from app.models import FileRecord
from tests.support.api import Account, Api

TODAY = datetime.now(UTC).date()
PATHS = [None, "a", "a/b", "a/b/c", "ab", "b", "a_b", "a%b"]
AKTIV_IDS = [None, "A1", "A2"]
REPROTYPEN = [None, "Scan", "Original"]


@dataclass(frozen=True)
class Spec:
    owner: int  # index into the accounts
    freigabe: bool
    sperrfrist: date | None
    path: str | None
    aktiv_id: str | None
    reprotyp: str | None


specs = st.builds(
    Spec,
    owner=st.integers(0, 2),
    freigabe=st.booleans(),
    sperrfrist=st.one_of(st.none(), st.integers(-3, 3).map(lambda d: TODAY + timedelta(days=d))),
    path=st.sampled_from(PATHS),
    aktiv_id=st.sampled_from(AKTIV_IDS),
    reprotyp=st.sampled_from(REPROTYPEN),
)
filters = st.fixed_dictionaries(
    {},
    optional={
        "path": st.sampled_from(["a", "a/", "a/b", "a_", "a%", "b"]),
        "aktiv_id": st.sampled_from(["A1", "A2"]),
        "reprotyp": st.sampled_from(["Scan", "Original"]),
        "freigabe": st.sampled_from(["0", "1"]),
        "since": st.sampled_from(["2000-01-01", "2999-01-01"]),
    },
)


def matches(spec: Spec, query: dict[str, str]) -> bool:
    if "path" in query and not (spec.path or "\0").startswith(query["path"]):
        return False
    if "aktiv_id" in query and spec.aktiv_id != query["aktiv_id"]:
        return False
    if "reprotyp" in query and spec.reprotyp != query["reprotyp"]:
        return False
    return query.get("since") != "2999-01-01"


def insert(api: Api, accounts: list[Account], records: list[Spec]) -> list[str]:
    storage = api.app.extensions["storage"]
    ids = []
    with api.app.app_context():
        for spec in records:
            record_id = uuid.uuid4()
            key = f"files/{record_id}/{uuid.uuid4()}"
            content = f"content of {record_id}\n".encode()
            storage.put(key, io.BytesIO(content))
            db.session.add(
                FileRecord(
                    id=record_id,
                    user_id=accounts[spec.owner].id,
                    stored_path=key,
                    checksum_sha256="0" * 64,
                    original_name="x.txt",
                    mime_type="text/plain",
                    size=len(content),
                    freigabe=spec.freigabe,
                    sperrfrist=spec.sperrfrist,
                    path=spec.path,
                    aktiv_id=spec.aktiv_id,
                    reprotyp=spec.reprotyp,
                )
            )
            ids.append(str(record_id))
        db.session.commit()
    return ids


def remove_all(api: Api) -> None:
    storage = api.app.extensions["storage"]
    for key in list(storage.iter_keys()):
        storage.delete(key)
    with api.app.app_context():
        db.session.execute(delete(FileRecord))
        db.session.commit()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(records=st.lists(specs, max_size=12), query=filters)
def test_visibility_holds_for_any_records_and_filters(
    api: Api, alice: Account, bob: Account, admin: Account, records: list[Spec], query: dict
):
    accounts = [alice, bob, admin]
    ids = insert(api, accounts, records)
    try:
        by_id = dict(zip(ids, records, strict=True))

        public = api.client.get("/api/public/files", query_string=query).get_json()
        expected_public = {i for i, s in by_id.items() if s.freigabe and matches(s, query)}
        assert {r["id"] for r in public["data"]} == expected_public

        for record_id, spec in by_id.items():
            single = api.client.get(f"/api/public/files/{record_id}")
            assert single.status_code == (200 if spec.freigabe else 404)
            download = api.client.get(f"/api/public/files/{record_id}/download")
            embargoed = spec.sperrfrist is not None and spec.sperrfrist > TODAY
            expected = 404 if not spec.freigabe else 403 if embargoed else 200
            assert download.status_code == expected, (spec, download.status_code)
            if expected != 200:
                assert b"content of" not in download.data

        for index, account in enumerate(accounts[:2]):  # the two normal users
            own = api.get("/api/files", account, query_string=query).get_json()
            expected_own = {
                i
                for i, s in by_id.items()
                if s.owner == index
                and matches(s, query)
                and ("freigabe" not in query or s.freigabe == (query["freigabe"] == "1"))
            }
            assert {r["id"] for r in own["data"]} == expected_own
            for record_id, spec in by_id.items():
                if spec.owner != index:
                    assert api.get(f"/api/files/{record_id}", account).status_code == 404
                    download = api.get(f"/api/files/{record_id}/download", account)
                    assert download.status_code == 404
    finally:
        remove_all(api)
