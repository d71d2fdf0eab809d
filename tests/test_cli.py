"""What the operator's `flask` shows and where it works (issue 47 item 6): `flask --help`
lists the service's commands only, every command the code names exists, and the commands
work from any folder, not only from the repository root."""

from __future__ import annotations

import re

from app import create_app
from tests.conftest import base_config
from tests.support.server import ROOT, clean_env, flask

#: A command as the code names it in backquotes: `flask audit verify|prune|export`.
NAMED_COMMAND = re.compile(r"`flask ((?:--app wsgi )?[a-z][a-z|-]*(?: [a-z][a-z|-]*)*)")


def named_commands() -> set[tuple[str, ...]]:
    """Every command path a docstring or comment under app/ names, alternatives spelled out."""
    found: set[tuple[str, ...]] = set()
    for source in (ROOT / "app").rglob("*.py"):
        for match in NAMED_COMMAND.finditer(source.read_text()):
            words = match.group(1).removeprefix("--app wsgi ").split()
            paths: list[tuple[str, ...]] = [()]
            for word in words:
                paths = [(*path, choice) for path in paths for choice in word.split("|")]
            found.update(paths)
    return found


def test_every_command_the_code_names_exists(tmp_path):
    named = named_commands()
    assert ("stats", "export") in named and ("audit", "verify") in named
    app = create_app(
        base_config(SQLALCHEMY_DATABASE_URI="sqlite://", STORAGE_LOCAL_ROOT=str(tmp_path))
    )
    runner = app.test_cli_runner()
    missing = {
        " ".join(path) for path in named if runner.invoke(args=[*path, "--help"]).exit_code != 0
    }
    assert missing == set()


def listed_commands(help_text: str) -> list[str]:
    """The command names of `flask --help`'s Commands section."""
    section = help_text.split("\nCommands:\n", 1)[1]
    return [line.split()[0] for line in section.splitlines() if line.startswith("  ")]


def test_flask_help_lists_the_services_commands_only(tmp_path):
    result = flask("--help", env=clean_env(STORAGE_LOCAL_ROOT=str(tmp_path)))
    assert result.returncode == 0, result.stderr
    listed = listed_commands(result.stdout)
    assert {"serve", "db", "users", "tokens", "provision-admin", "stats"} <= set(listed)
    # Flask's development server beside `serve`, and Flask-Limiter's maintenance group.
    assert "run" not in listed and "limiter" not in listed
