"""DataCite down, slow or refusing (issue 40): no request waits or fails, nothing is lost,
`flask doi status` shows what is owed with DataCite's error, `flask doi work` catches up;
two workers never send one change twice."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask

from app.doi import worker
from app.extensions import db
from app.models import Doi, utcnow
from tests.doi.conftest import Dois
from tests.support.api import Account, Api


def make_due_now(app: Flask) -> None:
    """An hour passes: every retry is due."""
    with app.app_context():
        for row in db.session.query(Doi).filter(Doi.due_at.is_not(None)):
            row.due_at = utcnow() - timedelta(seconds=1)
        db.session.commit()
        db.session.remove()


def test_datacite_down_for_an_hour_loses_nothing(api: Api, alice: Account, dois: Dois):
    dois.datacite.down()
    records = [api.create(alice, titel=f"R{i}", freigabe="false") for i in range(3)]
    reserved = [dois.reserved(r["id"], alice) for r in records]
    assert api.patch(records[0]["id"], alice, {"freigabe": True}).status_code == 200
    for _ in range(4):  # retries all through the hour
        result = dois.cli("work")
        assert result.exit_code == 0 and "failed 3" in result.output
        make_due_now(api.app)
    for doi in reserved:
        row = dois.row(doi)
        assert row is not None and row.due_at is not None and row.state is None
        assert row.attempts == 4 and "unavailable" in (row.last_error or "")
    status = dois.cli("status")
    assert status.exit_code == 1
    assert all(doi in status.output for doi in reserved)
    assert "3 DOI(s) pending, 3 failing" in status.output
    assert "unavailable" in status.output
    dois.datacite.up()
    make_due_now(api.app)
    assert "Done 3, failed 0" in dois.work()
    assert dois.datacite.dois[reserved[0]]["state"] == "findable"
    assert [dois.datacite.dois[d]["state"] for d in reserved[1:]] == ["draft", "draft"]
    status = dois.cli("status")
    assert status.exit_code == 0 and "0 DOI(s) pending, 0 failing" in status.output
    assert all(dois.row(d).last_error is None for d in reserved)  # type: ignore[union-attr]


def test_a_failed_call_waits_longer_each_time(api: Api, alice: Account, dois: Dois):
    dois.datacite.down()
    doi = dois.reserved(api.create(alice)["id"], alice)
    waits = []
    for _ in range(3):
        dois.work()
        row = dois.row(doi)
        assert row is not None and row.due_at is not None and row.last_attempt_at is not None
        waits.append((row.due_at - row.last_attempt_at).total_seconds())
        make_due_now(api.app)
    assert waits[0] == pytest.approx(30, abs=1)
    assert waits[1] == pytest.approx(60, abs=1) and waits[2] == pytest.approx(120, abs=1)


def test_a_422_from_datacite_is_kept_as_last_error(api: Api, alice: Account, dois: Dois):
    dois.datacite.fail_next(422, "Value at root is missing required property creators")
    record = api.create(alice, freigabe="false")
    doi = dois.reserved(record["id"], alice)
    assert "failed 1" in dois.work()
    row = dois.row(doi)
    assert row is not None and row.due_at is not None
    assert row.last_error == (
        "DataCite answered 422: Value at root is missing required property creators"
    )
    status = dois.cli("status")
    assert status.exit_code == 1 and "missing required property creators" in status.output
    make_due_now(api.app)
    dois.work()
    assert dois.datacite.dois[doi]["state"] == "draft" and dois.row(doi).last_error is None  # type: ignore[union-attr]


class TestInTheBackground:
    @pytest.fixture
    def stack_config(self, stack_config: dict[str, Any]) -> dict[str, Any]:
        return {**stack_config, "DOI_BACKGROUND": True}

    def test_requests_answer_while_datacite_hangs(self, api: Api, alice: Account, dois: Dois):
        gate = threading.Event()
        dois.datacite.gate = gate
        record = api.create(alice, titel="Bericht", freigabe="false")
        try:
            doi = dois.reserved(record["id"], alice)  # the worker now waits on DataCite
            # Meanwhile every request answers, DataCite still holds nothing.
            assert api.patch(record["id"], alice, {"titel": "Neu"}).status_code == 200
            other = api.create(alice, freigabe="false")
            assert dois.reserve(other["id"], alice).status_code == 201
            assert api.get(f"/api/files/{record['id']}", alice).status_code == 200
            assert dois.datacite.dois == {}
        finally:
            gate.set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
            len(dois.datacite.dois) < 2 or dois.row(doi).due_at is not None  # type: ignore[union-attr]
        ):
            time.sleep(0.05)
        assert dois.datacite.dois[doi]["attributes"]["titles"] == [{"title": "Neu"}]
        assert len(dois.datacite.dois) == 2
        # The thread finishes its pass before the app goes (it holds a connection till then).
        assert api.app.extensions["doi.worker"].idle.wait(timeout=30)


def test_two_workers_never_send_one_change_twice(api: Api, alice: Account, dois: Dois):
    records = [api.create(alice, freigabe="true") for _ in range(6)]
    reserved = [dois.reserved(r["id"], alice) for r in records]
    start = threading.Barrier(2)

    def run() -> None:
        with api.app.app_context():
            start.wait()
            try:
                worker.work_due()
            finally:
                db.session.remove()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    creates = [name for verb, name, _ in dois.datacite.calls if verb == "create"]
    publishes = [name for verb, name, event in dois.datacite.calls if event == "publish"]
    assert sorted(creates) == sorted(reserved) and sorted(publishes) == sorted(reserved)
    assert all(dois.datacite.dois[d]["state"] == "findable" for d in reserved)
