"""Issue 35, items 1 and 4: what an operator meets in the first hour says one line, never a
traceback, and exits non-zero: a wrong or unreachable `DATABASE_URL`, an unmigrated database,
a busy port, an unusable storage folder; `make run` refuses half an administrator setting;
`flask serve` names the pages' addresses and, while there is none, how to make an
administrator. Each case runs the real `flask --app wsgi ...` in a child process."""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app import create_app
from app.cli import NO_ADMINISTRATOR, NOT_MIGRATED
from app.config import database_url
from tests.conftest import base_config
from tests.support.server import ROOT, clean_env, flask, free_port


def env_for(tmp_path: Path, **settings: str) -> dict[str, str]:
    defaults = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "STORAGE_LOCAL_ROOT": str(tmp_path / "storage"),
    }
    return clean_env(**{**defaults, **settings})


def one_line(result: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def migrated(sqlite_template: Path, tmp_path: Path) -> dict[str, str]:
    shutil.copy(sqlite_template, tmp_path / "db.sqlite3")
    return env_for(tmp_path)


# --- DATABASE_URL ---------------------------------------------------------------------


def test_postgres_urls_are_read_as_postgresql_through_psycopg(tmp_path: Path):
    assert database_url("postgres://u:pw@db.example.org/files") == (
        "postgresql+psycopg://u:pw@db.example.org/files"
    )
    assert database_url("postgres+psycopg://u@h/d") == "postgresql+psycopg://u@h/d"
    assert database_url("postgresql://u@h/d") == "postgresql://u@h/d"
    assert database_url("sqlite:///x.sqlite3") == "sqlite:///x.sqlite3"
    app = create_app(
        base_config(
            SQLALCHEMY_DATABASE_URI="postgres://postgres@127.0.0.1:1/files",
            STORAGE_LOCAL_ROOT=str(tmp_path),
            TOKEN_CACHE_SECONDS=0,
            RECORD_CACHE_SECONDS=0,
        )
    )
    assert (
        app.config["SQLALCHEMY_DATABASE_URI"] == "postgresql+psycopg://postgres@127.0.0.1:1/files"
    )


@pytest.mark.parametrize(
    ("url", "line"),
    [
        (
            "postgres://postgres:secret@127.0.0.1:1/files",
            "Error: database error: cannot use "
            "postgresql+psycopg://postgres:***@127.0.0.1:1/files: connection failed: "
            'connection to server at "127.0.0.1", port 1 failed: Connection '
            "refused Is the server running on that host and accepting TCP/IP connections?",
        ),
        (
            "sqlite:////nonexistent-folder/files.sqlite3",
            "Error: DATABASE_URL: the folder of the SQLite database "
            "/nonexistent-folder/files.sqlite3 does not exist",
        ),
        (
            # Flask-SQLAlchemy reads a relative path from the instance folder.
            "sqlite:///nonexistent-folder/files.sqlite3",
            "Error: DATABASE_URL: the folder of the SQLite database "
            f"{ROOT / 'instance' / 'nonexistent-folder' / 'files.sqlite3'} does not exist "
            "(a relative path in DATABASE_URL starts at the instance folder)",
        ),
    ],
)
@pytest.mark.parametrize("command", [("users", "list"), ("db", "upgrade"), ("serve",)])
def test_an_unreachable_database_is_one_line(tmp_path: Path, url: str, line: str, command):
    result = flask(*command, env=env_for(tmp_path, DATABASE_URL=url))
    assert result.returncode == 1
    assert one_line(result) == line
    assert "secret" not in result.stderr


@pytest.mark.parametrize(
    ("url", "line"),
    [
        (
            "mysql://root@127.0.0.1/files",
            "configuration error: DATABASE_URL needs the driver 'MySQLdb', which is not "
            "installed: use postgresql://... (psycopg) or sqlite:///...",
        ),
        (
            "postgress://root@127.0.0.1/files",
            "configuration error: DATABASE_URL names an unknown kind of database 'postgress': "
            "use postgresql://... or sqlite:///...",
        ),
    ],
)
def test_a_database_url_of_no_known_kind_is_one_line(tmp_path: Path, url: str, line: str):
    result = flask("users", "list", env=env_for(tmp_path, DATABASE_URL=url))
    assert result.returncode == 2
    assert one_line(result) == line


@pytest.mark.postgres
def test_a_database_that_does_not_exist_is_one_line(tmp_path: Path, postgres_admin_url: str):
    import sqlalchemy as sa

    url = sa.make_url(postgres_admin_url).set(database="filerepo_no_such_database")
    result = flask("users", "list", env=env_for(tmp_path, DATABASE_URL=url.render_as_string(False)))
    assert result.returncode == 1
    line = one_line(result)
    assert line.startswith("Error: database error: cannot use postgresql")
    assert line.endswith('database "filerepo_no_such_database" does not exist')


@pytest.mark.parametrize(
    "command",
    [
        ("users", "list"),
        ("audit", "verify"),
        ("stats", "export", "--month", "2026-11"),
        ("serve",),
    ],
)
def test_a_sqlite_database_that_does_not_exist_is_named_and_not_made(tmp_path: Path, command):
    """A command finds a SQLite file missing, in one line naming where it looked, and leaves
    no empty database there (a wrong DATABASE_URL stays visible); `db upgrade` makes it."""
    path = tmp_path / "db.sqlite3"
    result = flask(*command, env=env_for(tmp_path))
    assert result.returncode == 1
    assert one_line(result) == (
        f"Error: DATABASE_URL: the SQLite database {path} does not exist: "
        "run `flask db upgrade` to create it (make run does)"
    )
    assert not path.exists()
    if command == ("users", "list"):
        assert flask("db", "upgrade", env=env_for(tmp_path)).returncode == 0
        assert flask(*command, env=env_for(tmp_path)).returncode == 0


def test_a_sqlite_url_with_a_host_is_one_line(tmp_path: Path):
    result = flask("users", "list", env=env_for(tmp_path, DATABASE_URL="sqlite://files.sqlite3"))
    assert result.returncode == 2
    assert one_line(result) == (
        "configuration error: DATABASE_URL sqlite://files.sqlite3 names a host, which SQLite "
        "has not: sqlite:///name.sqlite3 is a file in the instance folder, "
        "sqlite:////path/name.sqlite3 one at an absolute path"
    )


@pytest.mark.parametrize("command", [("serve",), ("users", "list"), ("audit", "verify")])
def test_an_unmigrated_database_says_to_migrate(tmp_path: Path, command):
    sqlite3.connect(tmp_path / "db.sqlite3").close()  # an empty database
    result = flask(*command, env=env_for(tmp_path))
    assert result.returncode == 1
    assert one_line(result) == f"Error: {NOT_MIGRATED}"
    assert NOT_MIGRATED == "the database is not migrated: run `flask db upgrade` (make run does)"


# --- flask serve: port, storage, addresses --------------------------------------------


def test_a_busy_port_is_one_line_naming_it(migrated: dict[str, str]):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = flask("serve", "--port", str(port), env=migrated)
    assert result.returncode == 1
    assert one_line(result) == (
        f"Error: port {port} on 127.0.0.1 is already in use: stop what listens there, or "
        "choose another with PORT or --port"
    )


@pytest.mark.parametrize(
    ("option", "line"),
    [
        (
            ("--host", "http://127.0.0.1"),
            "Error: HOST or --host is an address to listen on, not a URL: 'http://127.0.0.1' "
            "(for example 127.0.0.1, or 0.0.0.0 for every interface)",
        ),
        (
            ("--host", "example.invalid"),
            "Error: HOST or --host 'example.invalid' does not resolve to an address to listen on",
        ),
        *(
            (
                ("--port", port),
                f"Error: Invalid value for '--port': {port} is not in the range 1<=x<=65535.",
            )
            for port in ("-1", "0", "99999")
        ),
    ],
)
def test_an_address_serve_cannot_listen_on_is_one_line(
    migrated: dict[str, str], option: tuple[str, str], line: str
):
    result = flask("serve", *option, env=migrated)
    assert result.returncode in (1, 2)  # 2: click's usage errors
    assert result.stdout == ""
    assert result.stderr.splitlines()[-1] == line
    assert "Traceback" not in result.stderr


def test_an_unusable_storage_folder_is_one_line(migrated: dict[str, str], tmp_path: Path):
    root = tmp_path / "a-file"
    root.write_text("not a folder")
    result = flask("serve", env={**migrated, "STORAGE_LOCAL_ROOT": str(root)})
    assert result.returncode == 1
    assert one_line(result) == (
        f"Error: STORAGE_LOCAL_ROOT: local storage folder '{root}' is not writable: File exists"
    )


def serve_output(env: dict[str, str], lines: int) -> list[str]:
    """The first `lines` lines `flask serve` prints, then the server is stopped."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "flask", "--app", "wsgi", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        found = [process.stdout.readline().rstrip("\n") for _ in range(lines)]
    finally:
        process.terminate()
        process.communicate(timeout=15)
    return [line.replace(str(port), "PORT") for line in found]


def test_serve_names_the_front_and_docs_pages_and_how_to_make_an_administrator(
    migrated: dict[str, str],
):
    assert serve_output(migrated, 2) == [
        "Serving on http://127.0.0.1:PORT/ (API documentation: http://127.0.0.1:PORT/api/docs)",
        NO_ADMINISTRATOR,
    ]
    assert "ADMIN_EMAIL=" in NO_ADMINISTRATOR and "provision-admin" in NO_ADMINISTRATOR
    made = flask(
        "provision-admin", "--email", "admin@example.org", "--password", "a long passphrase",
        env=migrated,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    # Once there is one, the line after the addresses is the server's next: none here.
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "flask", "--app", "wsgi", "serve", "--port", str(port)],
        cwd=ROOT,
        env=migrated,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith(f"Serving on http://127.0.0.1:{port}/")
        time.sleep(1)
    finally:
        process.terminate()
        rest, _ = process.communicate(timeout=15)
    assert "No administrator" not in rest


# --- make run -------------------------------------------------------------------------


def fake_venv(tmp_path: Path) -> Path:
    """A `.venv` for `make run VENV=...` whose `flask` is this interpreter's: make then
    neither creates nor installs anything, it only runs the recipe's commands."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    flask_script = venv / "bin" / "flask"
    flask_script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m flask "$@"\n')
    flask_script.chmod(0o755)
    (venv / ".installed").touch()
    later = time.time() + 60
    os.utime(venv / ".installed", (later, later))
    return venv


@pytest.mark.parametrize(
    ("settings", "missing"),
    [({"ADMIN_EMAIL": "admin@example.org"}, "ADMIN_PASSWORD"),
     ({"ADMIN_PASSWORD": "a long passphrase"}, "ADMIN_EMAIL")],
)  # fmt: skip
def test_make_run_refuses_half_an_administrator_setting(
    migrated: dict[str, str], tmp_path: Path, settings: dict[str, str], missing: str
):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    venv = fake_venv(tmp_path)
    result = subprocess.run(
        ["make", "--no-print-directory", "-s", "run", f"VENV={venv}"],
        cwd=ROOT,
        env={**migrated, **settings, "PORT": str(free_port())},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "Serving on" not in result.stdout
    # make's own line ("make: *** ... Error 2") and the migrations' log lines are not ours.
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    other = "ADMIN_EMAIL" if missing == "ADMIN_PASSWORD" else "ADMIN_PASSWORD"
    assert errors == [
        f"Error: {missing} is not set while {other} is: set both to provision the "
        "administrator (or neither)."
    ]


def test_a_database_behind_the_code_says_which_migrations(tmp_path: Path):
    from flask_migrate import downgrade, upgrade

    from app.cli import migration_state

    sqlite3.connect(tmp_path / "db.sqlite3").close()  # an empty database
    app = create_app(
        base_config(
            SQLALCHEMY_DATABASE_URI=f"sqlite:///{tmp_path / 'db.sqlite3'}",
            STORAGE_LOCAL_ROOT=str(tmp_path / "storage"),
        )
    )
    with app.app_context():
        assert migration_state(app) == NOT_MIGRATED
        upgrade()
        assert migration_state(app) is None
        downgrade(revision="-1")
        state = migration_state(app)
        assert state is not None and state.endswith("run `flask db upgrade` (make run does)"), state
        assert state.startswith("the database is at migration ") and "the code needs" in state
