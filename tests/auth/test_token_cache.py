"""Checked tokens are remembered per process on PostgreSQL, and forgotten when they may end.

Two apps on one database stand for two server processes ("replicas"). Every change that can
end a token must reach both: at once in the process that made it, and through the database's
notification in the other, whoever made the change (a request, the CLI, SQL by hand).
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask

import app.auth.services as auth_services
import app.cache as token_cache
from app.cache import TOKENS
from app.extensions import db
from app.models import ApiToken, User, utcnow
from tests.support.api import Account
from tests.support.replicas import Replicas, wait_for

pytestmark = pytest.mark.postgres


def status(app: Flask, account: Account, path: str = "/api/files") -> int:
    return app.test_client().get(path, headers=account.auth).status_code


def token_queries(app: Flask) -> list[str]:
    """Collects the statements `app` sends that read api_tokens."""
    seen: list[str] = []
    with app.app_context():
        engine = db.engine

    @sa.event.listens_for(engine, "before_cursor_execute")
    def record(_conn, _cursor, statement, *_args) -> None:
        if "FROM api_tokens" in statement:
            seen.append(statement)

    return seen


def test_a_checked_token_is_not_read_again(replicas: Replicas):
    alice = replicas.api.account("alice@example.org")
    queries = token_queries(replicas.b)
    assert [status(replicas.b, alice) for _ in range(20)] == [200] * 20
    assert len(queries) == 1


def test_a_wrong_secret_is_refused_even_for_a_cached_token(replicas: Replicas):
    alice = replicas.api.account("alice@example.org")
    assert status(replicas.b, alice) == 200
    token_id, _, secret = alice.token.partition("|")
    forged = Account(alice.id, alice.email, alice.password, f"{token_id}|{secret[:-1]}x")
    assert status(replicas.b, forged) == 401
    assert status(replicas.b, alice) == 200


def test_wrong_secrets_are_not_cached(replicas: Replicas):
    alice = replicas.api.account("alice@example.org")
    token_id, _, secret = alice.token.partition("|")
    forged = Account(alice.id, alice.email, alice.password, f"{token_id}|{secret[:-1]}x")
    assert status(replicas.b, forged) == 401
    assert replicas.b.extensions["cache"].size(TOKENS) == 0


def test_signing_in_and_new_passwords_keep_the_cache(replicas: Replicas):
    alice = replicas.api.account("alice@example.org")
    client = replicas.b.test_client()
    assert status(replicas.b, alice) == 200
    body = {"email": alice.email, "password": alice.password, "token_name": "second"}
    assert client.post("/api/tokens", json=body).status_code == 201
    result = replicas.b.test_cli_runner().invoke(
        args=["users", "set-password", alice.email], input="another password 123\n" * 2
    )
    assert result.exit_code == 0, result.output
    queries = token_queries(replicas.b)
    assert status(replicas.b, alice) == 200
    assert queries == []


def test_without_the_triggers_nothing_is_cached(replicas: Replicas):
    """New code before `flask db upgrade` (or a downgrade): LISTEN alone would work, but
    nothing would ever notify, so the cache must stay off."""
    replicas.sql("DROP TRIGGER users_auth_changes ON users")
    app = replicas.app()
    alice = replicas.api.account("alice@example.org")
    queries = token_queries(app)
    assert [status(app, alice) for _ in range(3)] == [200] * 3
    assert len(queries) == 3


def test_revoking_answers_401_at_once_in_the_same_process(replicas: Replicas):
    alice = replicas.api.account("alice@example.org")
    client = replicas.b.test_client()
    assert client.get("/api/files", headers=alice.auth).status_code == 200
    assert client.delete("/api/tokens/current", headers=alice.auth).status_code == 204
    assert client.get("/api/files", headers=alice.auth).status_code == 401


def hold_back_notifications(replicas: Replicas) -> None:
    """From now on no change to tokens or accounts is announced by the database (the cache
    already listens, so it stays on): what a process sees of its own changes is then only
    what it notes itself, as when the notification is still on its way."""
    replicas.sql(
        "DROP TRIGGER api_tokens_auth_changes ON api_tokens",
        "DROP TRIGGER users_auth_changes ON users",
    )


def test_revoking_answers_401_on_the_next_request_without_the_notification(
    replicas: Replicas,
):
    alice = replicas.api.account("alice@example.org")
    client = replicas.b.test_client()
    assert client.get("/api/files", headers=alice.auth).status_code == 200
    assert replicas.b.extensions["cache"].size(TOKENS) == 1
    hold_back_notifications(replicas)
    assert client.delete("/api/tokens/current", headers=alice.auth).status_code == 204
    assert client.get("/api/files", headers=alice.auth).status_code == 401


def test_changes_to_an_account_count_on_the_next_request_without_the_notification(
    replicas: Replicas,
):
    alice = replicas.api.account("alice@example.org")
    bob = replicas.api.account("bob@example.org")
    record = replicas.api.create(bob)
    path = f"/api/files/{record['id']}"
    assert (status(replicas.b, alice, path), status(replicas.b, bob)) == (404, 200)
    hold_back_notifications(replicas)
    cli = replicas.b.test_cli_runner()

    granted = cli.invoke(
        args=["provision-admin", "--email", alice.email, "--password", alice.password]
    )
    assert granted.exit_code == 0, granted.output
    assert status(replicas.b, alice, path) == 200
    deactivated = cli.invoke(args=["users", "deactivate", bob.email])
    assert deactivated.exit_code == 0, deactivated.output
    assert status(replicas.b, bob) == 401
    assert cli.invoke(args=["users", "activate", bob.email]).exit_code == 0
    assert status(replicas.b, bob) == 200


def orm_change(change: str, alice: Account, bob: Account) -> None:
    """One change to alice's token or account through the ORM (what the CLI and services do)."""
    token = db.session.get(ApiToken, alice.token_id)
    if change == "delete the token":
        db.session.delete(token)
    elif change == "delete the account":
        db.session.delete(db.session.get(User, alice.id))
    elif change == "expire the token":
        token.expires_at = utcnow() - timedelta(seconds=1)
    elif change == "expire the token with an UPDATE statement":
        db.session.execute(
            sa.update(ApiToken)
            .where(ApiToken.id == alice.token_id)
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
    elif change == "expire the token by primary key in bulk":
        db.session.execute(
            sa.update(ApiToken),
            [{"id": alice.token_id, "expires_at": utcnow() - timedelta(seconds=1)}],
        )
    elif change == "expire the token by primary key in bulk beside .values()":
        # The statement alone names only `name`: the expiry is in the parameters.
        db.session.execute(
            sa.update(ApiToken).values(name="renamed"),
            [{"id": alice.token_id, "expires_at": utcnow() - timedelta(seconds=1)}],
        )
    elif change == "give the token to bob":
        token.user_id = bob.id
    elif change == "demote":
        db.session.get(User, alice.id).is_admin = False
    db.session.commit()


@pytest.mark.parametrize(
    "change",
    [
        "delete the token",
        "delete the account",
        "expire the token",
        "expire the token with an UPDATE statement",
        "expire the token by primary key in bulk",
        "expire the token by primary key in bulk beside .values()",
        "give the token to bob",
        "demote",
    ],
)
def test_orm_changes_count_on_the_next_request_without_the_notification(
    replicas: Replicas, change: str
):
    alice = replicas.api.account("alice@example.org", admin=True)
    bob = replicas.api.account("bob@example.org")
    if change == "give the token to bob":
        replicas.api.create(alice)  # seen by alice as an administrator, not by bob
    bobs = replicas.api.create(bob)["id"]
    path = f"/api/files/{bobs}"
    assert status(replicas.b, alice, path) == 200  # an administrator's, cached
    hold_back_notifications(replicas)
    with replicas.b.app_context():
        orm_change(change, alice, bob)
    expected = {"give the token to bob": 200, "demote": 404}.get(change, 401)
    assert status(replicas.b, alice, path) == expected
    if change == "give the token to bob":  # now bob's token: his records only
        listed = replicas.b.test_client().get("/api/files", headers=alice.auth).get_json()
        assert [r["id"] for r in listed["data"]] == [bobs]


def test_changes_to_records_keep_the_cached_tokens(replicas: Replicas):
    """A record changed in this process empties the record cache only: the token is not
    read again on the next request."""
    alice = replicas.api.account("alice@example.org")
    record = replicas.api.create(alice)
    assert status(replicas.b, alice) == 200
    queries = token_queries(replicas.b)
    response = replicas.b.test_client().patch(
        f"/api/files/{record['id']}", json={"titel": "neu"}, headers=alice.auth
    )
    assert response.status_code == 200
    assert status(replicas.b, alice) == 200
    assert queries == []


def test_changes_to_unchecked_columns_keep_the_cached_token(replicas: Replicas):
    alice = replicas.api.account("alice@example.org")
    assert status(replicas.b, alice) == 200
    with replicas.b.app_context():
        db.session.get(ApiToken, alice.token_id).name = "renamed"
        db.session.get(User, alice.id).name = "Alice"
        db.session.commit()
    queries = token_queries(replicas.b)
    assert status(replicas.b, alice) == 200
    assert queries == []


def revoke_in_a(replicas: Replicas, alice: Account) -> None:
    client = replicas.a.test_client()
    assert client.delete("/api/tokens/current", headers=alice.auth).status_code == 204


def deactivate_with_the_cli(replicas: Replicas, alice: Account) -> None:
    result = replicas.a.test_cli_runner().invoke(args=["users", "deactivate", alice.email])
    assert result.exit_code == 0, result.output


def delete_by_hand(replicas: Replicas, alice: Account) -> None:
    replicas.sql(("DELETE FROM api_tokens WHERE user_id = %s", (alice.id,)))


def deactivate_by_hand(replicas: Replicas, alice: Account) -> None:
    replicas.sql(("UPDATE users SET is_active = false WHERE id = %s", (alice.id,)))


def expire_by_hand(replicas: Replicas, alice: Account) -> None:
    replicas.sql("UPDATE api_tokens SET expires_at = now() - interval '1 second'")


def truncate_by_hand(replicas: Replicas, alice: Account) -> None:
    replicas.sql("TRUNCATE api_tokens")


@pytest.mark.parametrize(
    "change",
    [
        revoke_in_a,
        deactivate_with_the_cli,
        delete_by_hand,
        deactivate_by_hand,
        expire_by_hand,
        truncate_by_hand,
    ],
)
def test_a_change_made_elsewhere_ends_the_cached_token(replicas: Replicas, change):
    alice = replicas.api.account("alice@example.org")
    assert status(replicas.b, alice) == 200
    assert replicas.b.extensions["cache"].size(TOKENS) == 1
    change(replicas, alice)
    # Pushed by PostgreSQL at commit: milliseconds, not the cache's 60 seconds.
    wait_for(lambda: status(replicas.b, alice) == 401, seconds=2.0)  # not the cache's 60 s


def test_a_role_change_made_elsewhere_is_seen(replicas: Replicas):
    alice = replicas.api.account("alice@example.org")
    bob = replicas.api.account("bob@example.org")
    record = replicas.api.create(bob)
    path = f"/api/files/{record['id']}"
    assert status(replicas.b, alice, path) == 404  # not hers
    result = replicas.a.test_cli_runner().invoke(
        args=["provision-admin", "--email", alice.email, "--password", alice.password]
    )
    assert result.exit_code == 0, result.output
    wait_for(lambda: status(replicas.b, alice, path) == 200)


def test_the_last_use_is_still_recorded(replicas: Replicas):
    app = replicas.app(TOKEN_LAST_USED_RESOLUTION=0)
    alice = replicas.api.account("alice@example.org")
    token_id = int(alice.token.split("|")[0])

    def last_used() -> Any:
        with app.app_context():
            value = db.session.get(ApiToken, token_id).last_used_at
            db.session.remove()
            return value

    assert status(app, alice) == 200
    first = last_used()
    time.sleep(0.01)
    assert status(app, alice) == 200  # from the cache
    assert last_used() > first


def test_a_cached_token_still_expires(replicas: Replicas, monkeypatch: pytest.MonkeyPatch):
    app = replicas.app(TOKEN_TTL_MINUTES=5)
    client = app.test_client()
    alice = replicas.api.account("alice@example.org")
    token = client.post(
        "/api/tokens",
        json={"email": alice.email, "password": alice.password, "token_name": "short"},
    ).get_json()["token"]
    short = Account(alice.id, alice.email, alice.password, token)
    queries = token_queries(app)
    assert status(app, short) == 200
    later = utcnow() + timedelta(minutes=5, seconds=1)
    monkeypatch.setattr(auth_services, "utcnow", lambda: later)
    assert status(app, short) == 401
    assert len(queries) == 1  # the expiry was read from the cache


def test_a_token_ends_at_the_instant_it_expires(
    replicas: Replicas, monkeypatch: pytest.MonkeyPatch
):
    app = replicas.app(TOKEN_TTL_MINUTES=5)
    alice = replicas.api.account("alice@example.org")
    token = (
        app.test_client()
        .post(
            "/api/tokens",
            json={"email": alice.email, "password": alice.password, "token_name": "short"},
        )
        .get_json()["token"]
    )
    short = Account(alice.id, alice.email, alice.password, token)
    with app.app_context():
        expires_at = db.session.get(ApiToken, short.token_id).expires_at
        db.session.remove()
    monkeypatch.setattr(auth_services, "utcnow", lambda: expires_at - timedelta(microseconds=1))
    assert status(app, short) == 200  # read, then cached
    monkeypatch.setattr(auth_services, "utcnow", lambda: expires_at)
    assert status(app, short) == 401


def test_without_a_listening_connection_the_cache_is_not_used(replicas: Replicas):
    alice = replicas.api.account("alice@example.org")
    assert status(replicas.b, alice) == 200
    # The listening connection dies, then the token is deleted without a notification
    # (triggers off): only a cache that is no longer trusted can answer 401 now.
    assert replicas.terminate_listeners() == 1
    replicas.sql(
        "SET session_replication_role = replica",
        ("DELETE FROM api_tokens WHERE user_id = %s", (alice.id,)),
    )
    assert status(replicas.b, alice) == 401


def test_the_cache_listens_again_after_losing_its_connection(
    replicas: Replicas, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(token_cache, "RETRY_SECONDS", 0.0)
    alice = replicas.api.account("alice@example.org")
    assert status(replicas.b, alice) == 200
    assert replicas.terminate_listeners() == 1
    assert status(replicas.b, alice) == 200  # checked in the database meanwhile
    queries = token_queries(replicas.b)
    assert [status(replicas.b, alice) for _ in range(5)] == [200] * 5
    assert len(queries) == 1  # listening again: cached from the first of these
    deactivate_by_hand(replicas, alice)
    wait_for(lambda: status(replicas.b, alice) == 401)


def test_entries_are_checked_again_after_max_age(replicas: Replicas):
    app = replicas.app(TOKEN_CACHE_SECONDS=1)
    alice = replicas.api.account("alice@example.org")
    cached_at = time.monotonic()
    assert status(app, alice) == 200
    # A change that sends no notification (triggers off for this session) shows after the
    # entry's age runs out: the bound on what a silently lost notification could hide.
    replicas.sql(
        "SET session_replication_role = replica",
        ("DELETE FROM api_tokens WHERE user_id = %s", (alice.id,)),
    )
    assert status(app, alice) == 200
    wait_for(lambda: status(app, alice) == 401, seconds=3.0)
    assert time.monotonic() - cached_at >= 1.0  # not before the entry's age ran out


def test_sqlite_has_no_token_cache(make_sqlite_app):
    assert "cache" not in make_sqlite_app().extensions


def test_the_cache_can_be_turned_off(replicas: Replicas):
    app = replicas.app(TOKEN_CACHE_SECONDS=0)
    assert TOKENS not in app.extensions["cache"].channels
    alice = replicas.api.account("alice@example.org")
    queries = token_queries(app)
    assert [status(app, alice) for _ in range(3)] == [200] * 3
    assert len(queries) == 3
