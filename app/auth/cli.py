"""Operator commands for accounts; the administrator role is only ever given here."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import with_appcontext

from app.auth.services import AccountExists, create_user, provision_admin


@click.command("create-user")
@click.option("--email", required=True, help="Login email (unique, case-insensitive).")
@click.option("--name", required=True, help="Display name.")
@click.option(
    "--password",
    prompt=True,
    hide_input=True,
    confirmation_prompt=True,
    help="Password; prompted for (hidden) when not given.",
)
@with_appcontext
def create_user_command(email: str, name: str, password: str) -> None:
    """Create a normal user account."""
    if not password:
        raise click.UsageError("The password must not be empty.")
    try:
        user = create_user(email, name, password)
    except AccountExists as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"Created user {user.email} (id {user.id}).")


@click.command("provision-admin")
@click.option("--email", help="Administrator email [default: ADMIN_EMAIL].")
@click.option("--password", help="Administrator password [default: ADMIN_PASSWORD].")
@click.option("--name", help="Name for a new administrator [default: ADMIN_NAME].")
@with_appcontext
def provision_admin_command(email: str | None, password: str | None, name: str | None) -> None:
    """Create the administrator, or give an existing account admin rights and the password.

    Safe to run on every start: an existing account keeps its id and name.
    """
    config = current_app.config
    email = email or config.get("ADMIN_EMAIL")
    password = password or config.get("ADMIN_PASSWORD")
    name = name or config.get("ADMIN_NAME") or "Administrator"
    if not email:
        raise click.UsageError("ADMIN_EMAIL is not set and --email was not given.")
    if not password:
        raise click.UsageError("ADMIN_PASSWORD is not set and --password was not given.")
    user, created = provision_admin(email, name, password)
    verb = "Created" if created else "Updated"
    click.echo(f"{verb} administrator {user.email} (id {user.id}).")
