"""Metadata writes count against a per-user rate limit (issue 21: PATCH was unlimited, so one
user could rewrite paths thousands of times a minute and bloat the OAI-PMH set list)."""

from __future__ import annotations

from app import create_app
from app.extensions import db
from tests.support.api import Account, Api


def test_patches_are_rate_limited_per_user(
    api: Api, alice: Account, bob: Account, stack_config: dict
):
    app = create_app({**stack_config, "RATELIMIT_ENABLED": True, "RATELIMIT_WRITES": "2/minute"})
    limited = Api(app, app.test_client())
    mine = limited.create(alice, "a.txt", b"x\n")
    theirs = limited.create(bob, "b.txt", b"y\n")
    statuses = [limited.patch(mine["id"], alice, {"path": f"p/{i}"}).status_code for i in range(2)]
    assert statuses == [200, 200]
    refused = limited.patch(mine["id"], alice, {"path": "p/2"})
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) > 0
    assert refused.get_json()["message"]
    assert limited.row(mine["id"]).path == "p/1"
    assert limited.patch(theirs["id"], bob, {"path": "q"}).status_code == 200
    with app.app_context():
        db.engine.dispose()
