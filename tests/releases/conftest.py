"""Release approval on (`RELEASE_APPROVAL=on`) for the API tests of this folder, on both
stacks; an approver (carol) besides alice, bob and the administrator."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from app.extensions import db
from app.models import MailOutbox, ReleaseRequest, User
from tests.support.api import Account, Api


@pytest.fixture
def stack_config(stack_config: dict[str, Any]) -> dict[str, Any]:
    return {**stack_config, "RELEASE_APPROVAL": "on"}


def grant_approver(app: Flask, account: Account) -> None:
    result = app.test_cli_runner().invoke(args=["users", "grant-approver", account.email])
    assert result.exit_code == 0, result.output


@pytest.fixture
def carol(api: Api, app: Flask) -> Account:
    account = api.account("carol@example.org")
    grant_approver(app, account)
    return account


class Releases:
    """The release requests endpoints, and what the database holds of them."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.client = api.client

    def submit(self, record_id: str, account: Account, note: str | None = None) -> Any:
        body = {} if note is None else {"note": note}
        return self.client.post(
            f"/api/files/{record_id}/release-requests", json=body, headers=account.auth
        )

    def act(self, request_id: str, verb: str, account: Account, **body: Any) -> Any:
        return self.client.post(
            f"/api/release-requests/{request_id}/{verb}", json=body, headers=account.auth
        )

    def approve(self, request_id: str, account: Account, **body: Any) -> Any:
        return self.act(request_id, "approve", account, **body)

    def listed(self, account: Account, **query: str) -> Any:
        return self.api.get("/api/release-requests", account, query_string=query)

    def state(self, request_id: str) -> str:
        with self.api.app.app_context():
            request = db.session.get(ReleaseRequest, __import__("uuid").UUID(request_id))
            assert request is not None
            state = request.state
            db.session.remove()
            return state

    def outbox(self) -> list[tuple[str, str]]:
        with self.api.app.app_context():
            rows = db.session.query(MailOutbox).order_by(MailOutbox.id).all()
            found = [(row.recipient, row.subject) for row in rows]
            db.session.remove()
            return found

    def name_of(self, account: Account) -> str:
        with self.api.app.app_context():
            user = db.session.get(User, account.id)
            assert user is not None
            name = user.name
            db.session.remove()
            return name


@pytest.fixture
def releases(api: Api) -> Releases:
    return Releases(api)
