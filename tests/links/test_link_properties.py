"""Property test (issue 24 item 2): whatever the records, links and later changes to the
creator's account, nothing reachable through a link is outside what its creator may see at
that moment, and everything the link names within that is reachable."""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, update

from app.extensions import db
from app.models import ShareLink, User
from tests.files.test_visibility_properties import Spec, insert, remove_all, specs
from tests.links.test_links import TOMORROW, secret_of
from tests.support.api import Account, Api

KIT_PATHS = ["a", "a/b", "a_b", "b"]


@dataclass(frozen=True)
class LinkSpec:
    creator: int  # index into the accounts (2: the administrator)
    record: int | None  # index into the records, or None for a kit
    path: str


links = st.builds(
    LinkSpec,
    creator=st.integers(0, 2),
    record=st.one_of(st.none(), st.integers(0, 11)),
    path=st.sampled_from(KIT_PATHS),
)


def in_folder(path: str | None, folder: str) -> bool:
    return path is not None and (path == folder or path.startswith(folder + "/"))


def set_account(api: Api, account: Account, **values: object) -> None:
    with api.app.app_context():
        db.session.execute(update(User).where(User.id == account.id).values(**values))
        db.session.commit()


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    records=st.lists(specs, min_size=1, max_size=8),
    link_specs=st.lists(links, min_size=1, max_size=3),
    demote_admin=st.booleans(),
    deactivate=st.sampled_from([None, 0, 2]),
)
def test_a_link_reaches_only_what_its_creator_may_see_now(
    api: Api,
    alice: Account,
    bob: Account,
    admin: Account,
    records: list[Spec],
    link_specs: list[LinkSpec],
    demote_admin: bool,
    deactivate: int | None,
) -> None:
    accounts = [alice, bob, admin]
    ids = insert(api, accounts, records)
    try:
        made = []
        for spec in link_specs:
            creator = accounts[spec.creator]
            target = None if spec.record is None else spec.record % len(ids)
            if target is None:
                body = {"path": spec.path, "expires_at": TOMORROW}
                response = api.client.post("/api/links", json=body, headers=creator.auth)
            else:
                response = api.client.post(
                    f"/api/files/{ids[target]}/links",
                    json={"expires_at": TOMORROW},
                    headers=creator.auth,
                )
                if records[target].owner != spec.creator and spec.creator != 2:
                    assert response.status_code == 404  # not hers to share
                    continue
            assert response.status_code == 201
            made.append((spec, target, response.get_json()))

        # Later, the accounts change; every link follows its creator as the account is now.
        if demote_admin:
            set_account(api, admin, is_admin=False)
        if deactivate is not None:
            set_account(api, accounts[deactivate], is_active=False)

        for spec, target, link in made:
            may_see_all = spec.creator == 2 and not demote_admin
            alive = deactivate != spec.creator
            reachable = {
                record_id
                for n, (record_id, record) in enumerate(zip(ids, records, strict=True))
                if alive
                and (may_see_all or record.owner == spec.creator)
                and (n == target if target is not None else in_folder(record.path, spec.path))
            }
            secret = secret_of(link)
            for record_id in ids:
                response = api.client.get(f"/api/shared/{secret}/files/{record_id}/download")
                assert response.status_code == (200 if record_id in reachable else 404)
                if record_id in reachable:
                    assert response.data == f"content of {record_id}\n".encode()
            page = api.client.get(f"/api/shared/{secret}")
            if not alive:
                assert page.status_code == 404
                continue
            if target is None:
                assert {r["id"] for r in page.get_json()["data"]} == reachable
            else:
                assert page.status_code == (200 if reachable else 404)
            archive = api.client.get(f"/api/shared/{secret}/files.zip")
            assert archive.status_code == 200
            names = zipfile.ZipFile(io.BytesIO(archive.data)).namelist()
            assert len(names) == 1 + len(reachable)
    finally:
        set_account(api, admin, is_admin=True, is_active=True)
        for account in (alice, bob):
            set_account(api, account, is_active=True)
        with api.app.app_context():
            db.session.execute(delete(ShareLink))
            db.session.commit()
        remove_all(api)


def test_the_property_sees_a_kit_over_a_neighbour_folder() -> None:
    """`a/b` holds `a/b/c` but not `a/bc`: the folder rule the property relies on."""
    assert in_folder("a/b/c", "a/b") and in_folder("a/b", "a/b")
    assert not in_folder("a/bc", "a/b") and not in_folder(None, "a")
