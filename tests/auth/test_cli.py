"""Operator commands, run through Flask's CLI runner."""

from __future__ import annotations

from sqlalchemy import select

from app.extensions import db
from app.models import User


def users(app) -> list[User]:
    with app.app_context():
        found = db.session.scalars(select(User).order_by(User.id)).all()
        db.session.expunge_all()
        return list(found)


def test_create_user(app, runner):
    result = runner.invoke(
        args=["create-user", "--email", "Ada@Example.org", "--name", "Ada", "--password", "pw1"]
    )
    assert result.exit_code == 0, result.output
    assert "Created user ada@example.org" in result.output
    [user] = users(app)
    assert (user.email, user.name, user.is_admin) == ("ada@example.org", "Ada", False)
    assert "pw1" not in user.password_hash
    login = app.test_client().post(
        "/api/tokens", json={"email": "ada@example.org", "password": "pw1", "token_name": "t"}
    )
    assert login.status_code == 201


def test_create_user_prompts_for_a_missing_password(app, runner):
    result = runner.invoke(
        args=["create-user", "--email", "b@example.org", "--name", "B"], input="s3cret\ns3cret\n"
    )
    assert result.exit_code == 0, result.output
    assert "s3cret" not in result.output
    login = app.test_client().post(
        "/api/tokens", json={"email": "b@example.org", "password": "s3cret", "token_name": "t"}
    )
    assert login.status_code == 201


def test_create_user_refuses_a_duplicate_email(app, runner):
    args = ["create-user", "--email", "c@example.org", "--name", "C", "--password", "x"]
    assert runner.invoke(args=args).exit_code == 0
    args[2] = "C@EXAMPLE.ORG"
    result = runner.invoke(args=args)
    assert result.exit_code == 1
    assert "already exists" in result.output
    assert len(users(app)) == 1


def test_provision_admin_creates_then_updates_idempotently(app, runner):
    args = ["provision-admin", "--email", "root@example.org", "--password", "one", "--name", "Root"]
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
            "two",
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
        "/api/tokens", json={"email": "root@example.org", "password": "one", "token_name": "t"}
    )
    new = client.post(
        "/api/tokens", json={"email": "root@example.org", "password": "two", "token_name": "t"}
    )
    assert (old.status_code, new.status_code) == (422, 201)


def test_provision_admin_promotes_an_existing_user(app, runner):
    runner.invoke(
        args=["create-user", "--email", "u@example.org", "--name", "U", "--password", "p"]
    )
    [before] = users(app)
    result = runner.invoke(
        args=["provision-admin", "--email", "u@example.org", "--password", "new"]
    )
    assert result.exit_code == 0, result.output
    [after] = users(app)
    assert (after.id, after.name, after.is_admin) == (before.id, "U", True)


def test_provision_admin_reads_the_settings(app, runner):
    app.config.update(ADMIN_EMAIL="env@example.org", ADMIN_PASSWORD="pw", ADMIN_NAME="Env")
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
