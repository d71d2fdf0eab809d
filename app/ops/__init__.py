"""Operator commands beyond accounts: storage checks, user and token maintenance, bulk import."""

from flask import Flask


def register_cli(app: Flask) -> None:
    """Attach the operator command groups to the app's `flask` CLI."""
    from app.ops.importer import import_command
    from app.ops.reconcile import reconcile_command, verify_command
    from app.ops.storage_check import storage_group
    from app.ops.users import tokens_group, users_group

    storage_group.add_command(reconcile_command)
    storage_group.add_command(verify_command)
    app.cli.add_command(storage_group)
    app.cli.add_command(users_group)
    app.cli.add_command(tokens_group)
    app.cli.add_command(import_command)
