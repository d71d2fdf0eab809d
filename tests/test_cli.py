"""What the operator's `flask` shows and where it works (issue 47 item 6): `flask --help`
lists the service's commands only, every command the code names exists, and the commands
work from any folder, not only from the repository root."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

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


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clone as `make run` leaves it: the project installed editable into its `.venv`, the
    dependencies taken from the test environment (a plain path entry, so the test
    environment's own editable install of this checkout is not activated)."""
    root = tmp_path_factory.mktemp("clone")
    for name in ("pyproject.toml", "README.md", "wsgi.py", "app", "migrations"):
        origin = ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, root / name)
    venv = root / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
        + ["-e", str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "test-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    # pip would have made this entry point when installing Flask into the environment.
    flask_script = venv / "bin" / "flask"
    flask_script.write_text(
        f"#!{python}\nimport sys\nfrom flask.cli import main\nsys.exit(main())\n"
    )
    flask_script.chmod(0o755)
    return root


def flask_elsewhere(clone: Path, folder: Path, *args: str, **settings: str):
    """`<clone>/.venv/bin/flask ARGS` run in `folder`, as an operator's shell or cron would."""
    env = clean_env(**settings)
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        [str(clone / ".venv" / "bin" / "flask"), *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("app_option", [("--app", "wsgi"), ()], ids=["app-wsgi", "no-app"])
def test_the_commands_work_from_any_folder(
    clone: Path, sqlite_template: Path, tmp_path: Path, app_option: tuple[str, ...]
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(sqlite_template, tmp_path / "db.sqlite3")
    storage = str(tmp_path / "storage")
    listed = flask_elsewhere(
        clone,
        elsewhere,
        *app_option,
        "users",
        "list",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        STORAGE_LOCAL_ROOT=storage,
    )
    assert (listed.returncode, listed.stdout, listed.stderr) == (0, "No users.\n", "")
    # The clone's instance folder, whatever the current folder; an error in one line.
    missing = flask_elsewhere(clone, elsewhere, *app_option, "users", "list")
    assert missing.returncode == 1
    assert missing.stderr == (
        "Error: DATABASE_URL: the SQLite database "
        f"{clone / 'instance' / 'files.sqlite3'} does not exist: run `flask db upgrade` to "
        "create it (make run does)\n"
    )
    assert list(elsewhere.iterdir()) == []
    helped = flask_elsewhere(clone, elsewhere, *app_option, "--help", STORAGE_LOCAL_ROOT=storage)
    assert "work from any folder" in " ".join(helped.stdout.split())
