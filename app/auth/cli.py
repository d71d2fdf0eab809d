"""Operator commands for accounts, all in one place: `flask create-user`, `flask provision-admin`,
`flask users ...` and `flask tokens ...`. The administrator role is only ever given here."""

from __future__ import annotations

import json
from datetime import UTC

import click
from flask import current_app
from flask.cli import with_appcontext
from marshmallow import ValidationError

from app.auth.schemas import AccountSchema
from app.auth.services import (
    AccountExists,
    LastAdministrator,
    UserNotFound,
    UserSummary,
    create_user,
    list_users,
    provision_admin,
    prune_expired_tokens,
    set_active,
    set_password,
    set_role,
)
from app.schemas.field_types import format_timestamp

#: The rules of an account's email, name and password (the README states them).
account_schema = AccountSchema()


def checked(hints: dict[str, str], **given: str) -> dict[str, str]:
    """`given` through the account rules; a value they refuse is a usage error (exit 2) naming
    where it came from (`hints`: field -> option or setting)."""
    try:
        return account_schema.load_account(**given)
    except ValidationError as exc:
        messages: dict[str, list[str]] = exc.messages  # type: ignore[assignment]
        field, errors = next(iter(messages.items()))
        raise click.BadParameter(errors[0], param_hint=hints.get(field, field)) from None


class MissingSetting(click.ClickException):
    """A usage error (exit 2) in one line, without the usage text."""

    exit_code = 2


def _missing(email: str | None, password: str | None, hints: dict[str, str]) -> str:
    """What provision-admin lacks; half of the two settings is named as such (make run)."""
    if not email and not password:
        return (
            "ADMIN_EMAIL and ADMIN_PASSWORD are not set and --email and --password were not given."
        )
    lacking, option, other = (
        ("ADMIN_EMAIL", "--email", "password")
        if not email
        else ("ADMIN_PASSWORD", "--password", "email")
    )
    if hints[other].startswith("ADMIN_"):
        return (
            f"{lacking} is not set while {hints[other]} is: set both to provision the "
            "administrator (or neither)."
        )
    return f"{lacking} is not set and {option} was not given."


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
    """Create a normal user account.

    The email must be an address (name@example.org), the password at least 8 characters.
    """
    given = checked(
        {"email": "'--email'", "name": "'--name'", "password": "'--password'"},
        email=email,
        name=name,
        password=password,
    )
    try:
        user = create_user(given["email"], given["name"], given["password"])
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
    hints = {
        "email": "'--email'" if email else "ADMIN_EMAIL",
        "password": "'--password'" if password else "ADMIN_PASSWORD",
        "name": "'--name'" if name else "ADMIN_NAME",
    }
    email = email or config.get("ADMIN_EMAIL")
    password = password or config.get("ADMIN_PASSWORD")
    name = name or config.get("ADMIN_NAME") or "Administrator"
    if not email or not password:
        raise MissingSetting(_missing(email, password, hints))
    given = checked(hints, email=email, password=password, name=name)
    user, created = provision_admin(given["email"], given["name"], given["password"])
    verb = "Created" if created else "Updated"
    click.echo(f"{verb} administrator {user.email} (id {user.id}).")


@click.group("users")
def users_group() -> None:
    """List accounts, set passwords and roles, deactivate, reactivate and remove accounts."""


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
    The password must be at least 8 characters.
    """
    password = checked({"password": "'--password'"}, password=password)["password"]
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


@users_group.command("set-role")
@click.argument("email")
@click.argument("role", type=click.Choice(["admin", "user"]))
@with_appcontext
def set_role_command(email: str, role: str) -> None:
    """Make the account EMAIL an administrator (admin) or a normal user (user).

    Recorded in the audit trail (account.update, is_admin). The last active administrator
    keeps the role until another account has it.
    """
    try:
        user, changed = set_role(email, role == "admin")
    except (UserNotFound, LastAdministrator) as exc:
        raise click.ClickException(exc.message) from None
    label = "an administrator" if role == "admin" else "a normal user"
    if not changed:
        click.echo(f"User {user.email} (id {user.id}) is already {label}.")
    else:
        click.echo(f"{user.email} (id {user.id}) is now {label}.")


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
