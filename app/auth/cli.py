"""Operator commands for accounts, all in one place: `flask create-user`, `flask provision-admin`,
`flask users ...` and `flask tokens ...`. The administrator role is only ever given here."""

from __future__ import annotations

import json
from datetime import UTC

import click
from flask import current_app
from flask.cli import with_appcontext

from app.auth.services import (
    AccountExists,
    UserNotFound,
    UserSummary,
    create_user,
    list_users,
    provision_admin,
    prune_expired_tokens,
    set_active,
    set_password,
)
from app.schemas.field_types import format_timestamp

TABLE_COLUMNS = ("ID", "EMAIL", "NAME", "ADMIN", "ACTIVE", "CREATED", "FILES", "TOKENS")


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


@click.group("users")
def users_group() -> None:
    """List accounts, set passwords, deactivate and reactivate accounts."""


@click.group("tokens")
def tokens_group() -> None:
    """Maintain the stored API tokens."""


def _yes_no(value: bool) -> str:
    return "yes" if value else "no"


def _table_row(user: UserSummary) -> tuple[str, ...]:
    created = user.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
    return (
        str(user.id),
        user.email,
        user.name,
        _yes_no(user.is_admin),
        _yes_no(user.is_active),
        created,
        str(user.files),
        str(user.tokens),
    )


def _json_row(user: UserSummary) -> dict[str, object]:
    return {
        "id": user.id,
        "email": user.email,
        "name": user.name,
        "is_admin": user.is_admin,
        "is_active": user.is_active,
        "created_at": format_timestamp(user.created_at),
        "files": user.files,
        "tokens": user.tokens,
    }


def format_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """Left-aligned columns, numbers right-aligned, two spaces apart."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    numeric = [all(row[i].isdigit() for row in rows) and bool(rows) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        cells = [
            cell.rjust(width) if is_number else cell.ljust(width)
            for cell, width, is_number in zip(row, widths, numeric, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


@users_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of a table.")
@with_appcontext
def list_command(as_json: bool) -> None:
    """List accounts with their numbers of files and tokens.

    CREATED is in UTC. TOKENS counts every stored token, expired ones included until
    `flask tokens prune` removes them.
    """
    users = list_users()
    if as_json:
        click.echo(json.dumps([_json_row(user) for user in users], indent=2, ensure_ascii=False))
    elif not users:
        click.echo("No users.")
    else:
        click.echo(format_table(TABLE_COLUMNS, [_table_row(user) for user in users]))


@users_group.command("set-password")
@click.argument("email")
@click.option(
    "--password",
    prompt=True,
    hide_input=True,
    confirmation_prompt=True,
    help="New password; prompted for (hidden, twice) when not given.",
)
@with_appcontext
def set_password_command(email: str, password: str) -> None:
    """Give the account EMAIL a new password.

    Tokens issued before keep working; deactivate the account or let them expire to end them.
    """
    if not password:
        raise click.UsageError("The password must not be empty.")
    try:
        user = set_password(email, password)
    except UserNotFound as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"Set a new password for {user.email} (id {user.id}).")


def _set_active(email: str, active: bool) -> None:
    try:
        user, changed = set_active(email, active)
    except UserNotFound as exc:
        raise click.ClickException(exc.message) from None
    state = "active" if active else "deactivated"
    if not changed:
        click.echo(f"User {user.email} (id {user.id}) is already {state}.")
    elif active:
        click.echo(f"Activated {user.email} (id {user.id}); sign-in and their tokens work again.")
    else:
        click.echo(
            f"Deactivated {user.email} (id {user.id}); sign-in is refused and their tokens "
            "answer 401 until the account is activated again."
        )


@users_group.command("deactivate")
@click.argument("email")
@with_appcontext
def deactivate_command(email: str) -> None:
    """Block the account EMAIL: no sign-in, its tokens answer 401.

    Nothing is deleted: the tokens and files stay, and `flask users activate` restores access.
    """
    _set_active(email, False)


@users_group.command("activate")
@click.argument("email")
@with_appcontext
def activate_command(email: str) -> None:
    """Let the account EMAIL sign in again; its unexpired tokens work again."""
    _set_active(email, True)


@tokens_group.command("prune")
@click.option("--dry-run", is_flag=True, help="Only count the expired tokens.")
@with_appcontext
def prune_command(dry_run: bool) -> None:
    """Delete the tokens whose lifetime (TOKEN_TTL_MINUTES) has ended.

    Expired tokens already answer 401; pruning only removes their rows.
    """
    count = prune_expired_tokens(dry_run=dry_run)
    noun = "token" if count == 1 else "tokens"
    if dry_run:
        click.echo(f"{count} expired {noun} would be deleted (dry run, nothing changed).")
    else:
        click.echo(f"Deleted {count} expired {noun}.")
