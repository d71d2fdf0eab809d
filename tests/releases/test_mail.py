"""Mail about release requests goes through the outbox to a real SMTP server on loopback
(aiosmtpd, started here): after the commit, retried with backoff while the server is down,
and never slowing or failing the request."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from email import message_from_bytes, policy
from email.message import Message

import pytest
from aiosmtpd.controller import Controller
from flask import Flask

from app.extensions import db
from app.models import MailOutbox, utcnow
from app.releases.mail import Postman
from tests.releases.conftest import Releases
from tests.support.api import Account, Api
from tests.support.server import free_port


class Inbox:
    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802 (aiosmtpd's name)
        self.messages.append(message_from_bytes(envelope.content, policy=policy.default))
        return "250 OK"


class SmtpServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.inbox = Inbox()
        self.controller: Controller | None = None

    def start(self) -> None:
        self.controller = Controller(self.inbox, hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None


@pytest.fixture
def smtp(app: Flask) -> Iterator[SmtpServer]:
    server = SmtpServer()
    app.config.update(SMTP_HOST="127.0.0.1", SMTP_PORT=server.port, MAIL_FROM="repo@example.org")
    server.start()
    yield server
    server.stop()


def outbox(app: Flask) -> list[MailOutbox]:
    with app.app_context():
        rows = db.session.query(MailOutbox).order_by(MailOutbox.id).all()
        db.session.expunge_all()
        db.session.remove()
        return rows


def send(app: Flask) -> str:
    result = app.test_cli_runner().invoke(args=["mail", "send"])
    assert result.exit_code == 0, result.output
    return result.output.strip()


def submitted(api: Api, owner: Account) -> tuple[str, str]:
    response = api.upload(owner, titel="Bericht")
    assert response.status_code == 201
    body = response.get_json()
    return body["files"][0]["id"], body["release_requests"][0]["id"]


def test_approvers_hear_of_a_request_and_the_submitter_of_its_decision(
    app: Flask,
    api: Api,
    alice: Account,
    carol: Account,
    admin: Account,
    releases: Releases,
    smtp: SmtpServer,
):
    record_id, request_id = submitted(api, alice)
    assert send(app) == "Sent 2, failed 0 (retried later)."
    to = sorted(m["To"] for m in smtp.inbox.messages)
    assert to == sorted([carol.email, admin.email])
    first = smtp.inbox.messages[0]
    assert first["From"] == "repo@example.org"
    assert first["Subject"] == "Release request: Bericht"
    assert f"Bericht (record {record_id})" in first.get_content()
    assert alice.email in first.get_content()
    assert f"/api/release-requests/{request_id}" in first.get_content()
    assert releases.approve(request_id, carol).status_code == 200
    assert send(app) == "Sent 1, failed 0 (retried later)."
    decided = smtp.inbox.messages[-1]
    assert (decided["To"], decided["Subject"]) == (
        alice.email,
        "Release request approved: Bericht",
    )
    assert send(app) == "Sent 0, failed 0 (retried later)."
    assert all(row.sent_at is not None for row in outbox(app))


def test_while_the_server_is_down_mail_waits_and_is_retried_with_backoff(
    app: Flask, api: Api, alice: Account, carol: Account, smtp: SmtpServer
):
    smtp.stop()
    app.config["MAIL_RETRY_SECONDS"] = 30.0
    submitted(api, alice)
    before = utcnow()
    assert send(app) == "Sent 0, failed 1 (retried later)."
    [row] = outbox(app)
    assert (row.attempts, row.sent_at) == (1, None)
    assert row.last_error
    assert before + timedelta(seconds=29) <= row.next_attempt_at <= utcnow() + timedelta(seconds=31)
    # Not due yet: nothing is tried.
    assert send(app) == "Sent 0, failed 0 (retried later)."
    with app.app_context():
        db.session.get(MailOutbox, row.id).next_attempt_at = utcnow()
        db.session.commit()
    before = utcnow()
    assert send(app) == "Sent 0, failed 1 (retried later)."
    [row] = outbox(app)
    assert row.attempts == 2
    assert row.next_attempt_at >= before + timedelta(seconds=59)  # doubled
    with app.app_context():
        db.session.get(MailOutbox, row.id).next_attempt_at = utcnow()
        db.session.commit()
    smtp.start()
    assert send(app) == "Sent 1, failed 0 (retried later)."
    assert [m["To"] for m in smtp.inbox.messages] == [carol.email]
    [row] = outbox(app)
    assert row.sent_at is not None and row.attempts == 3


def test_a_mail_that_ran_out_of_tries_is_left_alone(
    app: Flask, api: Api, alice: Account, carol: Account, smtp: SmtpServer
):
    smtp.stop()
    app.config.update(MAIL_MAX_ATTEMPTS=1, MAIL_RETRY_SECONDS=0.0)
    submitted(api, alice)
    assert send(app) == "Sent 0, failed 1 (retried later)."
    smtp.start()
    assert send(app) == "Sent 0, failed 0 (retried later)."
    assert smtp.inbox.messages == []


def test_the_server_sends_after_the_commit_and_never_waits_for_smtp(
    app: Flask, api: Api, alice: Account, carol: Account, releases: Releases, smtp: SmtpServer
):
    app.extensions["postman"] = Postman(app)
    record_id, request_id = submitted(api, alice)
    deadline = time.monotonic() + 10
    while not smtp.inbox.messages and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [m["To"] for m in smtp.inbox.messages] == [carol.email]
    # With the server down the decision still answers at once; its mail waits.
    smtp.stop()
    started = time.monotonic()
    assert releases.approve(request_id, carol).status_code == 200
    assert time.monotonic() - started < 2
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        rows = outbox(app)
        if rows[-1].attempts:
            break
        time.sleep(0.05)
    assert (rows[-1].recipient, rows[-1].attempts, rows[-1].sent_at) == (alice.email, 1, None)
    assert api.row(record_id).freigabe is True


def test_without_smtp_host_mail_waits_in_the_outbox(
    app: Flask, api: Api, alice: Account, carol: Account
):
    submitted(api, alice)
    assert send(app) == "SMTP_HOST is not set: 1 mail(s) wait in the outbox."
    [row] = outbox(app)
    assert (row.recipient, row.attempts, row.sent_at) == (carol.email, 0, None)


def test_a_title_with_line_breaks_mails_on_one_subject_line(
    app: Flask, api: Api, alice: Account, carol: Account, smtp: SmtpServer
):
    response = api.upload(alice, titel="Bericht\r\nTeil 2\nAnhang")
    assert response.status_code == 201, response.get_json()
    assert send(app) == "Sent 1, failed 0 (retried later)."
    subjects = {m["Subject"] for m in smtp.inbox.messages}
    assert subjects == {"Release request: Bericht Teil 2 Anhang"}


def test_any_error_of_one_mail_is_its_failed_try_and_the_others_go(
    app: Flask, api: Api, alice: Account, carol: Account, smtp: SmtpServer
):
    with app.app_context():
        # A mail no SMTP message can carry (a header with a line break, as an older release
        # could queue): it fails, counted; the request's mail after it goes out.
        db.session.add(MailOutbox(recipient="x@example.org", subject="Eins\nZwei", body="."))
        db.session.commit()
        db.session.remove()
    submitted(api, alice)
    assert send(app) == "Sent 1, failed 1 (retried later)."
    bad = outbox(app)[0]
    assert (bad.attempts, bad.sent_at) == (1, None)
    assert bad.last_error and "Header values may not contain linefeed" in bad.last_error
    assert [m["To"] for m in smtp.inbox.messages] == [carol.email]


def test_a_sender_stopped_while_sending_hands_its_mail_back(
    app: Flask, api: Api, alice: Account, carol: Account, smtp: SmtpServer, monkeypatch
):
    submitted(api, alice)

    def stopped(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("smtplib.SMTP.send_message", stopped)
    with pytest.raises(KeyboardInterrupt), app.app_context():
        from app.releases.mail import send_due

        send_due()
    first = outbox(app)[0]
    assert first.sent_at is None and first.next_attempt_at <= utcnow()
    monkeypatch.undo()
    assert send(app) == "Sent 1, failed 0 (retried later)."
