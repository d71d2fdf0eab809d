"""`flask users ...` and `flask tokens prune`."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import func, select

from app.auth.services import issue_token
from app.extensions import db
from app.models import ApiToken, AuditEntry, User, utcnow
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
    result = runner.invoke(
        args=["users", "set-password", "Alice@Example.org", "--password", "n3w-pass"]
    )
    assert result.exit_code == 0, result.output
    assert result.output == f"Set a new password for alice@example.org (id {alice.id}).\n"
    assert login(app, "alice@example.org", alice.password) == 422
    assert login(app, "alice@example.org", "n3w-pass") == 201
    assert token_status(app, alice.token) == 200


def test_set_password_prompts_hidden_with_confirmation(app, runner, api):
    api.account("alice@example.org")
    result = runner.invoke(
        args=["users", "set-password", "alice@example.org"],
        input="first-pw\nsecond-pw\nn3w-pass\nn3w-pass\n",
    )
    assert result.exit_code == 0, result.output
    assert "n3w" not in result.output and "first" not in result.output
    assert "do not match" in result.output
    assert login(app, "alice@example.org", "n3w-pass") == 201


def test_set_password_of_an_unknown_user(runner):
    result = runner.invoke(
        args=["users", "set-password", "nobody@example.org", "--password", "x-123456"]
    )
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
    for command in ("list", "set-password", "set-role", "deactivate", "activate", "remove"):
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


# --- set-role and remove (issue 35, item 3) ---------------------------------------------


def trail(app) -> list[tuple[str, str, dict]]:
    """(action, actor, changes) of every audit entry, oldest first."""
    with app.app_context():
        rows = db.session.scalars(select(AuditEntry).order_by(AuditEntry.seq)).all()
        return [(row.action, row.actor, json.loads(row.changes)) for row in rows]


def is_admin(app, email: str) -> bool | None:
    with app.app_context():
        user = db.session.scalars(select(User).where(User.email == email)).first()
        return None if user is None else user.is_admin


def test_set_role_gives_and_takes_administrator_rights_in_the_trail(app, runner, api):
    api.account("root@example.org", admin=True)
    alice = api.account("alice@example.org")
    promoted = runner.invoke(args=["users", "set-role", "Alice@example.org", "admin"])
    assert promoted.exit_code == 0, promoted.output
    assert promoted.output == f"alice@example.org (id {alice.id}) is now an administrator.\n"
    assert is_admin(app, "alice@example.org") is True
    again = runner.invoke(args=["users", "set-role", "alice@example.org", "admin"])
    assert again.exit_code == 0 and "already an administrator" in again.output
    demoted = runner.invoke(args=["users", "set-role", "alice@example.org", "user"])
    assert demoted.exit_code == 0, demoted.output
    assert is_admin(app, "alice@example.org") is False
    changes = [entry for entry in trail(app) if entry[1] == "cli:users set-role"]
    assert changes == [
        ("account.update", "cli:users set-role", {"is_admin": [False, True]}),
        ("account.update", "cli:users set-role", {"is_admin": [True, False]}),
    ]
    # The API sees the role at once (no cached check keeps the old one on SQLite).
    assert app.test_client().get("/api/audit", headers=alice.auth).status_code == 403


def test_set_role_refuses_an_unknown_role_account_and_the_last_administrator(app, runner, api):
    api.account("root@example.org", admin=True)
    bad_role = runner.invoke(args=["users", "set-role", "root@example.org", "owner"])
    assert bad_role.exit_code == 2 and "'owner' is not one of 'admin', 'user'" in bad_role.output
    unknown = runner.invoke(args=["users", "set-role", "nobody@example.org", "admin"])
    assert unknown.exit_code == 1
    assert "No user with the email nobody@example.org." in unknown.output
    last = runner.invoke(args=["users", "set-role", "root@example.org", "user"])
    assert last.exit_code == 1
    assert "root@example.org is the only active administrator" in last.output
    assert is_admin(app, "root@example.org") is True


def test_remove_is_refused_while_the_account_owns_files(app, runner, api):
    alice = api.account("alice@example.org")
    api.create(alice, "a.pdf")
    result = runner.invoke(args=["users", "remove", "alice@example.org"])
    assert result.exit_code == 1
    assert (
        "alice@example.org owns 1 file record(s): hand them to another account with "
        "--hand-files-to EMAIL, or delete them first." in result.output
    )
    assert login(app, "alice@example.org", alice.password) == 201
    unknown_heir = runner.invoke(
        args=["users", "remove", "alice@example.org", "--hand-files-to", "nobody@example.org"]
    )
    assert unknown_heir.exit_code == 1 and "No user with the email nobody@example.org" in (
        unknown_heir.output
    )
    herself = runner.invoke(
        args=["users", "remove", "alice@example.org", "--hand-files-to", "ALICE@example.org"]
    )
    assert herself.exit_code == 1 and "another account" in herself.output


def test_remove_hands_files_and_links_over_and_revokes_tokens_in_the_trail(app, runner, api):
    admin = api.account("root@example.org", admin=True)
    alice = api.account("alice@example.org")
    bob = api.account("bob@example.org")
    record = api.create(alice, "a.pdf", freigabe="1", sperrfrist="2099-01-01")
    link = app.test_client().post(
        f"/api/files/{record['id']}/links",
        json={"expires_at": (utcnow() + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")},
        headers=alice.auth,
    )
    assert link.status_code == 201, link.get_json()
    shared = "/shared/" + link.get_json()["url"].rsplit("/", 1)[1]

    result = runner.invoke(
        args=["users", "remove", "alice@example.org", "--hand-files-to", "bob@example.org"]
    )
    assert result.exit_code == 0, result.output
    assert result.output == (
        f"Removed alice@example.org (id {alice.id}); 1 token(s) revoked; 1 file record(s) and "
        "1 share link(s) handed to bob@example.org.\n"
    )
    assert token_status(app, alice.token) == 401
    assert login(app, "alice@example.org", alice.password) == 422
    client = app.test_client()
    assert client.get(f"/api/files/{record['id']}", headers=bob.auth).status_code == 200
    mine = client.get("/api/files", headers=bob.auth).get_json()
    assert [r["id"] for r in mine["data"]] == [record["id"]] and mine["total"] == 1
    assert client.get("/api" + shared).status_code == 200  # the press link keeps working
    links = client.get(f"/api/files/{record['id']}/links", headers=bob.auth).get_json()
    assert [entry["created_by"] for entry in links["data"]] == ["bob@example.org"]

    removal = [entry for entry in trail(app) if entry[1] == "cli:users remove"]
    assert [action for action, _, _ in removal] == [
        "file.update",
        "link.update",
        "token.revoke",
        "account.delete",
    ]
    assert removal[0][2] == {"owner": ["alice@example.org", "bob@example.org"]}
    assert removal[1][2]["created_by"] == ["alice@example.org", "bob@example.org"]
    assert removal[3][2] == {
        "email": "alice@example.org",
        "name": "Test User",
        "is_admin": False,
        "is_active": True,
    }
    history = client.get(f"/api/files/{record['id']}/history", headers=admin.auth).get_json()
    assert "file.update" in [entry["action"] for entry in history["data"]]
    assert runner.invoke(args=["audit", "verify"]).exit_code == 0


def test_remove_of_an_account_without_files_revokes_its_links(app, runner, api):
    api.account("root@example.org", admin=True)
    carol = api.account("carol@example.org", admin=True)
    alice = api.account("alice@example.org")
    record = api.create(alice, "a.pdf")
    link = app.test_client().post(
        f"/api/files/{record['id']}/links",
        json={"expires_at": (utcnow() + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")},
        headers=carol.auth,
    )
    assert link.status_code == 201
    shared = "/shared/" + link.get_json()["url"].rsplit("/", 1)[1]
    result = runner.invoke(args=["users", "remove", "carol@example.org"])
    assert result.exit_code == 0, result.output
    assert "1 token(s) revoked; 1 share link(s) revoked." in result.output
    assert app.test_client().get("/api" + shared).status_code == 404
    actions = [action for action, actor, _ in trail(app) if actor == "cli:users remove"]
    assert actions == ["link.revoke", "token.revoke", "account.delete"]
    assert [u["email"] for u in json.loads(runner.invoke(args=["users", "list", "--json"]).output)
            ] == ["root@example.org", "alice@example.org"]  # fmt: skip


def test_remove_refuses_the_last_administrator(app, runner, api):
    api.account("root@example.org", admin=True)
    result = runner.invoke(args=["users", "remove", "root@example.org"])
    assert result.exit_code == 1
    assert "root@example.org is the only active administrator" in result.output
    assert is_admin(app, "root@example.org") is True
