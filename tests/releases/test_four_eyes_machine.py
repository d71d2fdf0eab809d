"""Random sequences of actions by three people (the owner, an approver, an administrator) on
one record with RELEASE_APPROVAL=on, replacing and editing it before and after its release:
the public sees the record's bytes and public fields only when someone other than its owner,
the submitter and every editor since the last approval (or an administrator by an explicit
override) approved exactly those; a released record's changes wait beside it meanwhile. Only a later
`sperrfrist` may differ from what was approved: it makes the content public later, not
sooner."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from app.extensions import db
from app.files.approval import PUBLIC_FIELDS
from app.models import FileRecord, ReleaseRequest
from tests.support import samples
from tests.support.api import Account, Api

CONTENTS = [samples.pdf_bytes() + f"\n% Fassung {n}\n".encode() for n in range(3)]
TITLES = ["Bericht", "Bericht (korrigiert)", "Entwurf"]
DAYS = [None, date.today() + timedelta(days=100), date.today() + timedelta(days=200)]
EDITORS = ["owner", "admin"]
PEOPLE = ["owner", "approver", "admin"]


@dataclass(frozen=True)
class Approved:
    """What an approval released, as the record was then."""

    content: str
    public: dict[str, Any]


def snapshot(api: Api, record_id: str) -> tuple[bool, str, dict[str, Any]]:
    with api.app.app_context():
        row = db.session.get(FileRecord, uuid.UUID(record_id))
        assert row is not None
        found = (row.freigabe, row.checksum_sha256, {n: getattr(row, n) for n in PUBLIC_FIELDS})
        db.session.remove()
        return found


def request_row(api: Api, request_id: str) -> ReleaseRequest:
    with api.app.app_context():
        row = db.session.get(ReleaseRequest, uuid.UUID(request_id))
        db.session.expunge_all()
        db.session.remove()
        assert row is not None
        return row


class FourEyes(RuleBasedStateMachine):
    api: Api
    people: dict[str, Account]

    @initialize()
    def upload(self) -> None:
        response = self.api.upload(self.people["owner"], titel=TITLES[0], freigabe="0")
        assert response.status_code == 201
        self.record_id = response.get_json()["files"][0]["id"]
        self.editors: set[str] = set()  # who changed content or public fields since approval
        self.submitters: dict[str, str] = {}  # request id -> who opened it
        self.approved: Approved | None = None

    # --- what people do -------------------------------------------------------------------

    def _changed(self, who: str, before: tuple, response: Any) -> None:
        after = snapshot(self.api, self.record_id)
        if response.status_code == 200 and (before[1], before[2]) != (after[1], after[2]):
            self.editors.add(who)
        body = response.get_json() if response.is_json else None
        opened = (body or {}).get("release_request")
        if opened and opened["id"] not in self.submitters:
            self.submitters[opened["id"]] = who
            if opened["kind"] != "release":
                # A change of a released record waits beside it: its author edited it.
                self.editors.add(who)

    @rule(
        who=st.sampled_from(EDITORS),
        title=st.sampled_from([None, *TITLES]),
        day=st.sampled_from(["keep", *DAYS]),
        release=st.sampled_from([None, True, False]),
    )
    def patch(self, who: str, title: str | None, day: Any, release: bool | None) -> None:
        """The DataHub client's edit: some of titel, sperrfrist and freigabe."""
        body: dict[str, Any] = {}
        if title is not None:
            body["titel"] = title
        if day != "keep":
            body["sperrfrist"] = None if day is None else day.isoformat()
        if release is not None:
            body["freigabe"] = release
        if not body:
            return
        before = snapshot(self.api, self.record_id)
        response = self.api.patch(self.record_id, self.people[who], body)
        if self._refused_for_another(who, before, response):
            return
        assert response.status_code == 200, response.get_json()
        self._changed(who, before, response)

    @rule(who=st.sampled_from(EDITORS), n=st.integers(0, len(CONTENTS) - 1))
    def replace(self, who: str, n: int) -> None:
        before = snapshot(self.api, self.record_id)
        response = self.api.replace(self.people[who], self.record_id, "bericht.pdf", CONTENTS[n])
        if self._refused_for_another(who, before, response):
            return
        assert response.status_code == 200, response.get_json()
        self._changed(who, before, response)

    def _refused_for_another(self, who: str, before: tuple, response: Any) -> bool:
        """A change of a released record is refused (409) while another person's change of it
        waits for approval, and changes nothing."""
        if response.status_code != 409:
            return False
        pending = self._pending()
        assert pending is not None, response.get_json()
        assert self.submitters.get(pending) != who, response.get_json()
        assert "another user's change" in response.get_json()["message"]
        assert snapshot(self.api, self.record_id) == before
        return True

    @rule(who=st.sampled_from(EDITORS))
    def submit(self, who: str) -> None:
        response = self.api.client.post(
            f"/api/files/{self.record_id}/release-requests",
            json={"note": "bitte"},
            headers=self.people[who].auth,
        )
        assert response.status_code in (201, 409), response.get_json()
        if response.status_code == 201:
            self.submitters[response.get_json()["id"]] = who

    def _pending(self) -> str | None:
        listed = self.api.get(
            "/api/release-requests",
            self.people["admin"],
            query_string={"state": "pending", "record_id": self.record_id},
        ).get_json()["data"]
        return listed[0]["id"] if listed else None

    @rule(who=st.sampled_from(PEOPLE), override=st.booleans())
    def approve(self, who: str, override: bool) -> None:
        request_id = self._pending()
        if request_id is None:
            return
        body = {"override_reason": "Eilt"} if override else {}
        response = self.api.client.post(
            f"/api/release-requests/{request_id}/approve",
            json=body,
            headers=self.people[who].auth,
        )
        assert response.status_code in (200, 403, 409), response.get_json()
        if response.status_code != 200:
            return
        submitter = self.submitters.get(request_id)
        interested = {"owner", submitter} | self.editors
        if who in interested:
            assert who == "admin" and override, (who, submitter, self.editors)
            assert response.get_json()["override"] is True
        else:
            assert response.get_json()["override"] is False
        request = request_row(self.api, request_id)
        released, content, public = snapshot(self.api, self.record_id)
        assert released
        assert (request.content_sha256, request.state) == (content, "approved")
        self.approved = Approved(content, public)
        self.editors = set()

    @rule(who=st.sampled_from(PEOPLE))
    def decline(self, who: str) -> None:
        request_id = self._pending()
        if request_id is not None:
            response = self.api.client.post(
                f"/api/release-requests/{request_id}/decline",
                json={"reason": "nein"},
                headers=self.people[who].auth,
            )
            assert response.status_code == (403 if who == "owner" else 200)

    # --- what must always hold ------------------------------------------------------------

    @invariant()
    def public_only_as_approved(self) -> None:
        if not hasattr(self, "record_id"):
            return
        released, content, public = snapshot(self.api, self.record_id)
        public_answer = self.api.get(f"/api/public/files/{self.record_id}")
        assert public_answer.status_code == (200 if released else 404)
        if not released:
            return
        assert self.approved is not None
        assert content == self.approved.content
        # What the public gets, not only what the row holds: the approved fields and bytes.
        shown = public_answer.get_json()
        assert {n: shown[n] for n in ("titel", "original_name", "mime_type")} == {
            n: self.approved.public[n] for n in ("titel", "original_name", "mime_type")
        }
        download = self.api.get(f"/api/public/files/{self.record_id}/download")
        if download.status_code == 200:
            assert hashlib.sha256(download.data).hexdigest() == self.approved.content
        same = {n: v for n, v in public.items() if n != "sperrfrist"}
        assert same == {n: v for n, v in self.approved.public.items() if n != "sperrfrist"}
        approved_day, day = self.approved.public["sperrfrist"], public["sperrfrist"]
        assert approved_day is None or (day is not None and day >= approved_day)


def test_public_only_when_someone_else_approved_exactly_this(
    api: Api, alice: Account, carol: Account, admin: Account
) -> None:
    FourEyes.api = api
    FourEyes.people = {"owner": alice, "approver": carol, "admin": admin}
    FourEyes.TestCase.settings = settings(
        max_examples=10,
        stateful_step_count=16,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    FourEyes.TestCase().runTest()
