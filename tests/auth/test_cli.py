"""Operator commands, run through Flask's CLI runner."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from app.extensions import db
from app.models import User

ROOT = Path(__file__).resolve().parents[2]


def users(app) -> list[User]:
    with app.app_context():
        found = db.session.scalars(select(User).order_by(User.id)).all()
        db.session.expunge_all()
        return list(found)


def test_create_user(app, runner):
    result = runner.invoke(
        args=[
            "create-user",
            "--email",
            "Ada@Example.org",
            "--name",
            "Ada",
            "--password",
            "pw-12345",
        ]
    )
    assert result.exit_code == 0, result.output
    assert "Created user ada@example.org" in result.output
    [user] = users(app)
    assert (user.email, user.name, user.is_admin) == ("ada@example.org", "Ada", False)
    assert "pw-12345" not in user.password_hash
    login = app.test_client().post(
        "/api/tokens", json={"email": "ada@example.org", "password": "pw-12345", "token_name": "t"}
    )
    assert login.status_code == 201


def test_create_user_prompts_for_a_missing_password(app, runner):
    result = runner.invoke(
        args=["create-user", "--email", "b@example.org", "--name", "B"],
        input="s3cret-pw\ns3cret-pw\n",
    )
    assert result.exit_code == 0, result.output
    assert "s3cret-pw" not in result.output
    login = app.test_client().post(
        "/api/tokens", json={"email": "b@example.org", "password": "s3cret-pw", "token_name": "t"}
    )
    assert login.status_code == 201


def test_create_user_refuses_a_duplicate_email(app, runner):
    args = ["create-user", "--email", "c@example.org", "--name", "C", "--password", "x-123456"]
    assert runner.invoke(args=args).exit_code == 0
    args[2] = "C@EXAMPLE.ORG"
    result = runner.invoke(args=args)
    assert result.exit_code == 1
    assert "already exists" in result.output
    assert len(users(app)) == 1


def test_provision_admin_creates_then_updates_idempotently(app, runner):
    args = [
        "provision-admin",
        "--email",
        "root@example.org",
        "--password",
        "one-1234",
        "--name",
        "Root",
    ]
    first = runner.invoke(args=args)
    assert first.exit_code == 0, first.output
    assert "Created administrator root@example.org" in first.output
    [created] = users(app)
    assert created.is_admin and created.name == "Root"

    again = runner.invoke(
        args=[
            "provision-admin",
            "--email",
            "ROOT@example.org",
            "--password",
            "two-1234",
            "--name",
            "Other Name",
        ]
    )
    assert again.exit_code == 0, again.output
    assert "Updated administrator" in again.output
    [updated] = users(app)
    assert (updated.id, updated.name, updated.is_admin) == (created.id, "Root", True)
    client = app.test_client()
    old = client.post(
        "/api/tokens", json={"email": "root@example.org", "password": "one-1234", "token_name": "t"}
    )
    new = client.post(
        "/api/tokens", json={"email": "root@example.org", "password": "two-1234", "token_name": "t"}
    )
    assert (old.status_code, new.status_code) == (422, 201)


def test_provision_admin_promotes_an_existing_user(app, runner):
    runner.invoke(
        args=["create-user", "--email", "u@example.org", "--name", "U", "--password", "p-123456"]
    )
    [before] = users(app)
    result = runner.invoke(
        args=["provision-admin", "--email", "u@example.org", "--password", "new-1234"]
    )
    assert result.exit_code == 0, result.output
    [after] = users(app)
    assert (after.id, after.name, after.is_admin) == (before.id, "U", True)


def test_provision_admin_reads_the_settings(app, runner):
    app.config.update(ADMIN_EMAIL="env@example.org", ADMIN_PASSWORD="pw-12345", ADMIN_NAME="Env")
    result = runner.invoke(args=["provision-admin"])
    assert result.exit_code == 0, result.output
    [user] = users(app)
    assert (user.email, user.name, user.is_admin) == ("env@example.org", "Env", True)


def test_provision_admin_without_settings_says_what_is_missing(app, runner):
    result = runner.invoke(args=["provision-admin"])
    assert result.exit_code == 2
    assert "ADMIN_EMAIL" in result.output
    result = runner.invoke(args=["provision-admin", "--email", "x@example.org"])
    assert result.exit_code == 2
    assert "ADMIN_PASSWORD" in result.output
    assert users(app) == []


# --- the account rules (issue 35, item 3): the CLI refuses what the rule refuses ----------


@pytest.mark.parametrize(
    ("args", "where", "message"),
    [
        (
            ["create-user", "--email", "bad-email", "--name", "B", "--password", "long enough"],
            "'--email'",
            "The email must be an address such as name@example.org.",
        ),
        (
            ["create-user", "--email", "b@example.org", "--name", "B", "--password", "pw"],
            "'--password'",
            "The password must be at least 8 characters long.",
        ),
        (
            ["create-user", "--email", "b@example.org", "--name", "  ", "--password", "pw-12345"],
            "'--name'",
            "The name must not be empty.",
        ),
        (
            ["provision-admin", "--email", "not-an-email", "--password", "x"],
            "'--email'",
            "The email must be an address such as name@example.org.",
        ),
        (
            ["provision-admin", "--email", "root@example.org", "--password", "x"],
            "'--password'",
            "The password must be at least 8 characters long.",
        ),
        (
            ["provision-admin", "--email", "root@example.org", "--password", "        "],
            "'--password'",
            "The password must not be empty.",
        ),
    ],
)
def test_account_commands_refuse_what_the_rule_refuses(app, runner, args, where, message):
    result = runner.invoke(args=args)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for {where}: {message}" in result.output
    assert users(app) == []


def test_provision_admin_names_the_setting_a_refused_value_came_from(app, runner):
    app.config.update(ADMIN_EMAIL="admin@example.org", ADMIN_PASSWORD="short")
    result = runner.invoke(args=["provision-admin"])
    assert result.exit_code == 2
    assert "Invalid value for ADMIN_PASSWORD: The password must be at least 8" in result.output
    assert users(app) == []


def test_set_password_refuses_what_the_rule_refuses(app, runner):
    created = runner.invoke(
        args=["create-user", "--email", " Ada@Example.org ", "--name", " Ada ", "--password",
              "a long passphrase"]
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    [user] = users(app)
    assert (user.email, user.name) == ("ada@example.org", "Ada")
    result = runner.invoke(args=["users", "set-password", "ada@example.org", "--password", "pw"])
    assert result.exit_code == 2
    assert "Invalid value for '--password': The password must be at least 8" in result.output
    login = app.test_client().post(
        "/api/tokens",
        json={"email": "ada@example.org", "password": "a long passphrase", "token_name": "t"},
    )
    assert login.status_code == 201


def test_the_readme_states_the_account_rule():
    readme = (ROOT / "README.md").read_text()
    assert "at least 8 characters" in readme
    assert "name@example.org" in readme
