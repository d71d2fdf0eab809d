"""Operator commands beyond accounts (those are in app/auth/cli.py): storage checks and repair,
bulk import, and the removal of an account with what it owns (`flask users remove`)."""

from flask import Flask


def register_cli(app: Flask) -> None:
    """Attach the operator command groups to the app's `flask` CLI."""
    from app.auth.cli import users_group
    from app.ops.accounts import remove_command
    from app.ops.importer import import_command
    from app.ops.reconcile import reconcile_command, verify_command
    from app.ops.storage_check import storage_group

    storage_group.add_command(reconcile_command)
    storage_group.add_command(verify_command)
    app.cli.add_command(storage_group)
    app.cli.add_command(import_command)
    users_group.add_command(remove_command)
