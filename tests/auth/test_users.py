"""`flask users ...` and `flask tokens prune`."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import func, select

from app.auth.services import issue_token
from app.extensions import db
from app.models import ApiToken, User, utcnow
from tests.ops.helpers import lines


def login(app, email: str, password: str) -> int:
    response = app.test_client().post(
        "/api/tokens", json={"email": email, "password": password, "token_name": "t"}
    )
    return response.status_code


def token_status(app, token: str) -> int:
    headers = {"Authorization": f"Bearer {token}"}
    return app.test_client().get("/api/files", headers=headers).status_code


def token_count(app) -> int:
    with app.app_context():
        return db.session.scalar(select(func.count()).select_from(ApiToken)) or 0


# --- users list -------------------------------------------------------------------------


def test_list_shows_a_table_with_files_and_tokens(app, runner, api):
    admin = api.account("root@example.org", admin=True)
    alice = api.account("alice@example.org")
    api.create(alice, "a.pdf")
    api.create(alice, "b.pdf")
    with app.app_context():
        issue_token(db.session.get(User, alice.id), "second")
    runner.invoke(args=["users", "deactivate", "root@example.org"])

    result = runner.invoke(args=["users", "list"])
    assert result.exit_code == 0, result.output
    header, *rows = lines(result.output)
    assert header.split() == [
        "ID",
        "EMAIL",
        "NAME",
        "ADMIN",
        "ACTIVE",
        "CREATED",
        "FILES",
        "TOKENS",
    ]
    cells = [row.split() for row in rows]
    # NAME is "Test User" (two words); CREATED is "YYYY-MM-DD HH:MM" (two words).
    assert [(c[0], c[1], c[4], c[5], c[8], c[9]) for c in cells] == [
        (str(admin.id), "root@example.org", "yes", "no", "0", "1"),
        (str(alice.id), "alice@example.org", "no", "yes", "2", "2"),
    ]


def test_list_as_json(app, runner, api):
    alice = api.account("alice@example.org")
    api.create(alice)
    result = runner.invoke(args=["users", "list", "--json"])
    assert result.exit_code == 0, result.output
    [entry] = json.loads(result.output)
    created = entry.pop("created_at")
    assert entry == {
        "id": alice.id,
        "email": "alice@example.org",
        "name": "Test User",
        "is_admin": False,
        "is_active": True,
        "files": 1,
        "tokens": 1,
    }
    assert created.endswith("Z") and len(created) == len("2026-04-30T10:15:00.123456Z")


def test_list_without_users(runner):
    assert runner.invoke(args=["users", "list"]).output == "No users.\n"
    assert json.loads(runner.invoke(args=["users", "list", "--json"]).output) == []


# --- set-password -----------------------------------------------------------------------


def test_set_password_with_the_option(app, runner, api):
    alice = api.account("alice@example.org")
    result = runner.invoke(args=["users", "set-password", "Alice@Example.org", "--password", "n3w"])
    assert result.exit_code == 0, result.output
    assert result.output == f"Set a new password for alice@example.org (id {alice.id}).\n"
    assert login(app, "alice@example.org", alice.password) == 422
    assert login(app, "alice@example.org", "n3w") == 201
    assert token_status(app, alice.token) == 200


def test_set_password_prompts_hidden_with_confirmation(app, runner, api):
    api.account("alice@example.org")
    result = runner.invoke(
        args=["users", "set-password", "alice@example.org"], input="first\nsecond\nn3w\nn3w\n"
    )
    assert result.exit_code == 0, result.output
    assert "n3w" not in result.output and "first" not in result.output
    assert "do not match" in result.output
    assert login(app, "alice@example.org", "n3w") == 201


def test_set_password_of_an_unknown_user(runner):
    result = runner.invoke(args=["users", "set-password", "nobody@example.org", "--password", "x"])
    assert result.exit_code == 1
    assert "No user with the email nobody@example.org." in result.output


def test_set_password_refuses_an_empty_password(app, runner, api):
    alice = api.account("alice@example.org")
    result = runner.invoke(args=["users", "set-password", "alice@example.org", "--password", ""])
    assert result.exit_code == 2
    assert login(app, "alice@example.org", alice.password) == 201


# --- deactivate / activate --------------------------------------------------------------


def test_deactivate_stops_tokens_and_sign_in_until_activated(app, runner, api):
    alice = api.account("alice@example.org")
    assert token_status(app, alice.token) == 200

    result = runner.invoke(args=["users", "deactivate", "ALICE@example.org"])
    assert result.exit_code == 0, result.output
    assert "Deactivated alice@example.org" in result.output
    assert token_status(app, alice.token) == 401
    assert login(app, "alice@example.org", alice.password) == 422
    assert token_count(app) == 1  # kept, only blocked

    again = runner.invoke(args=["users", "deactivate", "alice@example.org"])
    assert again.exit_code == 0
    assert "is already deactivated" in again.output

    result = runner.invoke(args=["users", "activate", "alice@example.org"])
    assert result.exit_code == 0, result.output
    assert "Activated alice@example.org" in result.output
    assert token_status(app, alice.token) == 200
    assert login(app, "alice@example.org", alice.password) == 201


def test_activate_an_active_user_changes_nothing(runner, api):
    api.account("alice@example.org")
    result = runner.invoke(args=["users", "activate", "alice@example.org"])
    assert result.exit_code == 0
    assert "is already active" in result.output


def test_deactivate_an_unknown_user(runner):
    for command in ("deactivate", "activate"):
        result = runner.invoke(args=["users", command, "nobody@example.org"])
        assert result.exit_code == 1
        assert "No user with the email nobody@example.org." in result.output


def test_users_help(runner):
    result = runner.invoke(args=["users", "--help"])
    assert result.exit_code == 0
    for command in ("list", "set-password", "deactivate", "activate"):
        assert command in result.output


# --- tokens prune -----------------------------------------------------------------------


def _age_tokens(app, minutes: int) -> None:
    """Move every token's expiry into the past, as if `minutes` had gone by."""
    with app.app_context():
        for token in db.session.scalars(select(ApiToken)):
            if token.expires_at is not None:
                token.expires_at -= timedelta(minutes=minutes)
        db.session.commit()


def test_prune_deletes_only_expired_tokens(app, runner, api):
    keeper = api.account("keeper@example.org")  # no TTL: never expires
    app.config["TOKEN_TTL_MINUTES"] = 30
    old = api.account("old@example.org")
    with app.app_context():
        issue_token(db.session.get(User, old.id), "second")
    _age_tokens(app, 31)
    fresh = api.account("fresh@example.org")
    assert token_status(app, old.token) == 401
    assert token_count(app) == 4

    dry = runner.invoke(args=["tokens", "prune", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert dry.output == "2 expired tokens would be deleted (dry run, nothing changed).\n"
    assert token_count(app) == 4

    result = runner.invoke(args=["tokens", "prune"])
    assert result.exit_code == 0, result.output
    assert result.output == "Deleted 2 expired tokens.\n"
    assert token_count(app) == 2
    assert token_status(app, keeper.token) == 200
    assert token_status(app, fresh.token) == 200

    assert runner.invoke(args=["tokens", "prune"]).output == "Deleted 0 expired tokens.\n"


def test_prune_counts_a_token_expiring_right_now(app, runner, api):
    alice = api.account("alice@example.org")
    with app.app_context():
        token = db.session.scalars(select(ApiToken).where(ApiToken.user_id == alice.id)).one()
        token.expires_at = utcnow()
        db.session.commit()
    result = runner.invoke(args=["tokens", "prune"])
    assert result.output == "Deleted 1 expired token.\n"
    assert token_count(app) == 0


def test_tokens_help(runner):
    result = runner.invoke(args=["tokens", "prune", "--help"])
    assert result.exit_code == 0
    assert "--dry-run" in result.output and "expired" in result.output
