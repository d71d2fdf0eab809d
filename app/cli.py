"""`flask serve`: the production server, waitress, configured for the service's limits; the
one line an operator reads instead of a traceback when the database, the storage or the port
is not what the settings promise (README, "Operator commands"); and what `flask --help` shows
the operator."""

from __future__ import annotations

import copy
import errno
import logging
import os
import re
import signal
import socket
import sys
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

import click
from flask import Flask, current_app
from flask.cli import with_appcontext
from sqlalchemy import exc as sa_exc
from sqlalchemy import select
from sqlalchemy.engine import make_url

from app.database import SQLiteFileMissing

#: What `flask serve` (and any command) says of a database without the service's tables.
NOT_MIGRATED = "the database is not migrated: run `flask db upgrade` (make run does)"
#: What `flask serve` says while no account is an administrator.
NO_ADMINISTRATOR = (
    "No administrator yet: create one with "
    "`ADMIN_EMAIL=you@example.org ADMIN_PASSWORD='a long passphrase' make run` "
    "or `.venv/bin/flask --app wsgi provision-admin --email E --password P`."
)
log = logging.getLogger(__name__)

# SQLite's "no such table", PostgreSQL's undefined_table (42P01).
_NO_TABLE = re.compile(r"no such table|UndefinedTable|relation \"[^\"]+\" does not exist")


#: Commands of Flask and its extensions that are not the operator's: Flask's development server
#: (`flask serve` is the service's) and Flask-Limiter's maintenance group.
NOT_THE_OPERATORS = ("run", "limiter")
#: The end of `flask --help`: where the commands work from (wsgi is installed with the
#: package, pyproject.toml) and where their settings come from.
OPERATOR_HELP = (
    "The commands work from any folder once `make run` has installed the service into the "
    "clone's .venv: /path/to/the/clone/.venv/bin/flask --app wsgi users list. They read their "
    "settings from the environment (DATABASE_URL, STORAGE_BACKEND, ...)."
)


def present_to_operators(names: tuple[str, ...] = NOT_THE_OPERATORS) -> None:
    """The help of the `flask` command that is loading the app: `names` left out (they
    belong to the `flask` group itself, Flask's own and plugin commands, not to `app.cli`;
    they still run when named) and OPERATOR_HELP at its end."""
    context = click.get_current_context(silent=True)
    group = context.find_root().command if context is not None else None
    if not isinstance(group, click.Group):
        return
    group.epilog = OPERATOR_HELP
    for name in names:
        command = group.commands.get(name)
        if command is not None and not command.hidden:
            hidden = copy.copy(command)  # Flask's own object stays as it is
            hidden.hidden = True
            group.commands[name] = hidden


def database_address(config: Mapping[str, Any]) -> str:
    """`DATABASE_URL` as it may be shown: the password hidden."""
    try:
        return make_url(config["SQLALCHEMY_DATABASE_URI"]).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - validate() refused it already; never fail to say so
        return "DATABASE_URL"


def _first_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text or type(error).__name__


def database_error_line(error: BaseException, config: Mapping[str, Any]) -> str | None:
    """One line for an error of the database's (unreachable, refused, no tables), or None."""
    if not isinstance(error, sa_exc.DBAPIError):
        return None
    cause = error.orig if error.orig is not None else error
    if isinstance(cause, SQLiteFileMissing):
        return str(cause)
    if _NO_TABLE.search(f"{type(cause).__name__} {cause}"):
        return NOT_MIGRATED
    return f"database error: cannot use {database_address(config)}: {_first_line(cause)}"


def one_line_errors(config: Mapping[str, Any]) -> Callable[..., None]:
    """A `sys.excepthook` that says an error of the database's in one line on stderr (the exit
    status stays 1) and leaves every other error's traceback as it is."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], error: BaseException, tb: TracebackType | None) -> None:
        line = database_error_line(error, config)
        if line is None:
            previous(kind, error, tb)
        else:
            print(f"Error: {line}", file=sys.stderr)

    return hook


def migration_state(app: Flask) -> str | None:
    """Why the database cannot be served (not migrated, or behind the code), or None."""
    from alembic.migration import MigrationContext
    from alembic.script import ScriptDirectory

    from app.extensions import db

    migrate = app.extensions["migrate"].migrate
    # Beside the package in a checkout; an installed wheel runs from a folder that holds them
    # (the image: `db upgrade --directory migrations`); without either only "none" is told.
    folders = [migrate.directory, os.path.join(os.getcwd(), "migrations")]
    folder = next((f for f in folders if os.path.isfile(os.path.join(f, "env.py"))), None)
    with db.engine.connect() as connection:
        current = set(MigrationContext.configure(connection).get_current_heads())
    if not current:
        return NOT_MIGRATED
    if folder is None:
        return None
    heads = set(ScriptDirectory.from_config(migrate.get_config(folder)).get_heads())
    if current != heads:
        return (
            f"the database is at migration {', '.join(sorted(current))}, the code needs "
            f"{', '.join(sorted(heads))}: run `flask db upgrade` (make run does)"
        )
    return None


def storage_problem(app: Flask) -> str | None:
    """Why a local storage folder cannot be used, or None. An S3 bucket is not probed here:
    it may come up after the service (readiness says so, /readyz)."""
    from app.storage.base import StorageUnavailable
    from app.storage.local import LocalStorage

    storage = app.extensions.get("storage")
    if not isinstance(storage, LocalStorage):
        return None
    try:
        storage.check()
    except StorageUnavailable as exc:
        return f"STORAGE_LOCAL_ROOT: {exc}"
    return None


def has_administrator() -> bool:
    from app.extensions import db
    from app.models import User

    return db.session.scalar(select(User.id).where(User.is_admin).limit(1)) is not None


def listen_address_problem(host: str) -> str | None:
    """Why `host` (HOST or --host) is no address to listen on, or None: a URL or a name that
    does not resolve would otherwise end in waitress's traceback."""
    if "/" in host or host.count(":") == 1:
        return (
            f"HOST or --host is an address to listen on, not a URL: {host!r} (for example "
            "127.0.0.1, or 0.0.0.0 for every interface)"
        )
    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return f"HOST or --host {host!r} does not resolve to an address to listen on"
    return None


@click.command("serve")
@click.option("--host", help="Interface to listen on [default: HOST or 127.0.0.1].")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    help="Port to listen on, 1 to 65535 [default: PORT or 8000].",
)
@click.option("--threads", type=int, help="Worker threads [default: SERVER_THREADS or 8].")
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    help="Worker processes [default: SERVER_PROCESSES or the number of cores].",
)
@with_appcontext
def serve_command(
    host: str | None, port: int | None, threads: int | None, processes: int | None
) -> None:
    """Serve the API with waitress, from as many processes as cores (app/processes.py).

    Refuses to start, in one line, when the database cannot be reached or is not migrated,
    the storage folder cannot be written or the port is taken.
    """
    from app.processes import serve_in_processes
    from app.server import (
        listening_sockets,
        make_server,
        release_freed_memory_to_the_system,
        serve_until_stopped,
        warn_when_links_follow_any_host,
    )

    app = current_app._get_current_object()  # type: ignore[attr-defined]
    problem = migration_state(app) or storage_problem(app)
    if problem is not None:
        raise click.ClickException(problem)
    release_freed_memory_to_the_system()
    host = host or app.config["HOST"]
    port = port or app.config["PORT"]
    problem = listen_address_problem(host)
    if problem is not None:
        raise click.ClickException(problem)
    threads = threads or app.config["SERVER_THREADS"]
    processes = processes or app.config["SERVER_PROCESSES"]
    try:
        if processes == 1:
            server = make_server(app, host=host, port=port, threads=threads)
            listening = (server.effective_host, server.effective_port)
        else:
            sockets = listening_sockets(host, port, processes)
            listening = sockets[0].getsockname()[:2]
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise click.ClickException(
                f"port {port} on {host} is already in use: stop what listens there, or choose "
                "another with PORT or --port"
            ) from None
        raise click.ClickException(
            f"cannot listen on {host}:{port}: {exc.strerror or exc} (HOST, PORT)"
        ) from None
    shown, listening_port = listening
    warn_when_links_follow_any_host(app, [shown])
    base = f"http://{f'[{shown}]' if ':' in shown else shown}:{listening_port}"
    click.echo(f"Serving on {base}/ (API documentation: {base}/api/docs)")
    if not has_administrator():
        click.echo(NO_ADMINISTRATOR)
    if processes > 1:
        if str(app.config["RATELIMIT_STORAGE_URI"]).startswith("memory://"):
            log.warning(
                "RATELIMIT_STORAGE_URI is memory://: each of the %s processes counts for "
                "itself (the default, processes://, counts for all of them)",
                processes,
            )
        sys.stdout.flush()  # not once more from each child
        status = serve_in_processes(app, sockets, processes, threads)
        if status:
            sys.exit(status)
        return
    # A stop (docker stop, systemd) ends like Ctrl-C, so the exit handlers run: among them
    # the statistics' last flush (app/stats/collector.py).
    signal.signal(signal.SIGTERM, _stop)
    serve_until_stopped(server)


def _stop(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
