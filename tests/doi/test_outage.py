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

from app import create_app
from app.doi import worker
from app.extensions import db
from app.models import Doi, utcnow
from tests.doi.conftest import Dois
from tests.support.api import Account, Api


def make_due_now(app: Flask) -> None:
    """Time passes: every retry is due."""
    with app.app_context():
        for row in db.session.query(Doi).filter(Doi.due_at.is_not(None)):
            row.due_at = utcnow() - timedelta(seconds=1)
        db.session.commit()
        db.session.remove()


def wait_for(condition: Any, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.05)


def test_datacite_down_for_an_hour_loses_nothing(api: Api, alice: Account, dois: Dois):
    dois.datacite.down()
    records = [api.create(alice, titel=f"R{i}", freigabe="false") for i in range(3)]
    reserved = [dois.reserved(r["id"], alice) for r in records]
    assert api.patch(records[0]["id"], alice, {"freigabe": True}).status_code == 200
    for _ in range(4):  # the retries all through the hour
        result = dois.cli("work")
        assert result.exit_code == 0 and "failed 3" in result.output
        make_due_now(api.app)
    for doi in reserved:
        row = dois.row(doi)
        assert row is not None and row.due_at is not None and row.state is None
        assert row.attempts == 4 and "Connection refused" in (row.last_error or "")
    status = dois.cli("status")
    assert status.exit_code == 1
    assert all(doi in status.output for doi in reserved)
    assert "3 DOI(s) pending, 3 failing" in status.output
    assert "Connection refused" in status.output
    dois.datacite.up()
    assert "Done 3, failed 0" in dois.work()
    assert dois.held(reserved[0])["state"] == "findable"
    assert [dois.held(d)["state"] for d in reserved[1:]] == ["draft", "draft"]
    status = dois.cli("status")
    assert status.exit_code == 0 and "0 DOI(s) pending, 0 failing" in status.output
    assert all(dois.row(d).last_error is None for d in reserved)  # type: ignore[union-attr]


class TestBackoff:
    @pytest.fixture
    def stack_config(self, stack_config: dict[str, Any]) -> dict[str, Any]:
        return {**stack_config, "DOI_RETRY_SECONDS": 30.0, "DOI_RETRY_MAX_SECONDS": 100.0}

    def test_a_failed_call_waits_longer_each_time(self, api: Api, alice: Account, dois: Dois):
        dois.datacite.down(refuse=False)  # 503 to everything
        doi = dois.reserved(api.create(alice)["id"], alice)
        waits = []
        for _ in range(4):
            dois.work()
            row = dois.row(doi)
            assert row is not None and row.due_at is not None and row.last_attempt_at is not None
            waits.append(round((row.due_at - row.last_attempt_at).total_seconds()))
            make_due_now(api.app)
        assert waits == [30, 60, 100, 100]
        assert "503" in (dois.row(doi).last_error or "")  # type: ignore[union-attr]


def test_a_422_from_datacite_is_kept_as_last_error(api: Api, alice: Account, dois: Dois):
    dois.datacite.fail_next(1, 422)
    record = api.create(alice, freigabe="false")
    doi = dois.reserved(record["id"], alice)
    assert "failed 1" in dois.work()
    row = dois.row(doi)
    assert row is not None and row.due_at is not None
    assert (row.last_error or "").startswith("DataCite answered 422: ")
    status = dois.cli("status")
    assert status.exit_code == 1 and "DataCite answered 422" in status.output
    make_due_now(api.app)
    dois.work()
    row = dois.row(doi)
    assert dois.held(doi)["state"] == "draft" and row is not None and row.last_error is None


class TestForeignPrefix:
    @pytest.fixture
    def stack_config(self, stack_config: dict[str, Any]) -> dict[str, Any]:
        return {**stack_config, "DATACITE_PREFIX": "10.80002"}

    def test_datacites_refusal_is_kept_with_its_message(self, api: Api, alice: Account, dois: Dois):
        doi = dois.reserved(api.create(alice)["id"], alice)
        dois.work()
        row = dois.row(doi)
        assert row is not None and row.state is None and row.due_at is not None
        assert row.last_error == (
            "DataCite answered 403: You are not authorized to access this resource."
        )


class TestInTheBackground:
    @pytest.fixture
    def stack_config(self, stack_config: dict[str, Any]) -> dict[str, Any]:
        return {**stack_config, "DOI_BACKGROUND": True, "DATACITE_TIMEOUT_SECONDS": 1.0}

    def test_requests_answer_while_datacite_is_slow(self, api: Api, alice: Account, dois: Dois):
        dois.datacite.slow(60)  # it acts at once but answers a minute later
        record = api.create(alice, titel="Bericht", freigabe="false")
        doi = dois.reserved(record["id"], alice)
        wait_for(lambda: dois.datacite.requests, "the worker's call")
        # While the worker waits for DataCite's answer, every request answers.
        assert api.patch(record["id"], alice, {"titel": "Neu"}).status_code == 200
        other = api.create(alice, freigabe="false")
        assert dois.reserve(other["id"], alice).status_code == 201
        assert api.get(f"/api/files/{record['id']}", alice).get_json()["doi"] == doi
        row = dois.row(doi)
        assert row is not None and row.state is None  # the answer has not come
        # The worker gives up waiting (its timeout), keeps the error and retries later.
        wait_for(lambda: (dois.row(doi).last_error or "") != "", "the timeout")  # type: ignore[union-attr]
        worker_thread = api.app.extensions["doi.worker"]
        assert worker_thread.idle.wait(timeout=30)
        dois.datacite.slow(0)
        dois.datacite.down(refuse=True)  # ends the answer still held back
        dois.datacite.up()
        make_due_now(api.app)
        assert "failed 0" in dois.work()
        # The draft DataCite made from the call that timed out is found and brought up to date.
        assert dois.held(doi)["state"] == "draft"
        assert dois.held(doi)["titles"] == [{"title": "Neu"}]
        row = dois.row(doi)
        assert row is not None and row.state == "draft" and row.due_at is None


def test_two_replicas_never_send_one_change_twice(
    api: Api, alice: Account, dois: Dois, stack_config: dict[str, Any]
):
    """Two app instances on one database (two replicas) work the outbox at once."""
    records = [api.create(alice, freigabe="true") for _ in range(6)]
    reserved = [dois.reserved(r["id"], alice) for r in records]
    dois.datacite.slow(0.05)  # calls overlap
    replicas = [api.app, create_app(stack_config)]
    start = threading.Barrier(len(replicas))

    def run(app: Flask) -> None:
        with app.app_context():
            start.wait()
            try:
                worker.work_due()
            finally:
                db.session.remove()

    threads = [threading.Thread(target=run, args=(app,)) for app in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    with replicas[1].app_context():
        db.engine.dispose()
    creates = [r.attributes["doi"] for r in dois.datacite.sent("POST")]
    publishes = [r.path for r in dois.datacite.sent("PUT") if r.attributes.get("event")]
    assert sorted(creates) == sorted(reserved)
    assert sorted(publishes) == sorted(f"/dois/{doi}" for doi in reserved)
    assert all(dois.held(d)["state"] == "findable" for d in reserved)
    assert all(dois.row(d).due_at is None for d in reserved)  # type: ignore[union-attr]
