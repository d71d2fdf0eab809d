"""Operator commands beyond accounts: storage checks, user and token maintenance, bulk import."""

from flask import Flask


def register_cli(app: Flask) -> None:
    """Attach the operator command groups to the app's `flask` CLI."""
