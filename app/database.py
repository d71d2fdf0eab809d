"""Database plumbing: the declarative base, the session class, the connection listeners
(autocommit reads, pings of idle connections, SQLite's pragmas, a SQLite file that is not
there) and SQLite's write lock."""

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from flask import has_request_context, request
from flask_sqlalchemy.session import Session as FlaskSession
from sqlalchemy import Engine, event, exc
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.orm import Session as OrmSession


class Base(DeclarativeBase):
    pass


#: Set in a request's WSGI environment by `read_without_transaction`.
READS_IN_AUTOCOMMIT = "file_repository.autocommit"


class Session(FlaskSession):
    """Flask-SQLAlchemy's session, whose connections are in autocommit mode during a request
    that `read_without_transaction` marked. The mode is chosen when the session first needs
    a connection, so a request answered from the caches (app/cache.py) takes none at all."""

    def get_bind(self, mapper: Any = None, clause: Any = None, bind: Any = None, **kw: Any) -> Any:
        found = super().get_bind(mapper=mapper, clause=clause, bind=bind, **kw)
        if (
            isinstance(found, Engine)
            and has_request_context()
            and request.environ.get(READS_IN_AUTOCOMMIT)
        ):
            return _autocommit_view(found)
        return found


def _autocommit_view(engine: Engine) -> Engine:
    """`engine` with autocommit connections: the same pool, one view per engine (a session
    keeps its connections per engine object)."""
    view: Engine | None = engine.__dict__.get("_autocommit_view")
    if view is None:
        view = engine.__dict__.setdefault(
            "_autocommit_view", engine.execution_options(isolation_level="AUTOCOMMIT")
        )
    return view


def read_without_transaction() -> None:
    """Let a GET or HEAD request read in autocommit mode.

    Its statements then run without the BEGIN and ROLLBACK around them, two of the round
    trips a read would otherwise make; each statement still sees committed data only. A
    write such a request makes (a token's coarse last-use time) commits at once. Call it
    before the request's first statement; the connection is only taken when one is needed.
    """
    if request.method in ("GET", "HEAD"):
        request.environ[READS_IN_AUTOCOMMIT] = True


#: Execution option: run this statement as a server-side prepared statement (psycopg only).
PREPARED = "file_repository_prepared"
#: psycopg's `prepare_threshold` in the app: executions of one statement on one connection
#: before psycopg prepares it by itself, i.e. never (`None` would also refuse `PREPARED`).
NEVER_BY_COUNT = 2**62


def prepare_marked_statements(engine: Engine) -> None:
    """Let a statement ask to be prepared on the server (`execution_options(PREPARED=True)`).

    The app turns psycopg's automatic preparing off (`NEVER_BY_COUNT`, app/__init__.py):
    a prepared statement's generic plan cannot use the path index for `path LIKE 'prefix%'`.
    A statement that looks a row up by its primary key has no such trap and is planned anew
    on every execution otherwise, which is most of its time on the server (a landing page's
    read: 0.35 ms planned each time, 0.13 ms prepared). Such a statement asks for this.
    """
    if engine.dialect.driver != "psycopg":
        return

    @event.listens_for(engine, "do_execute")
    def execute(cursor: Any, statement: str, parameters: Any, context: Any) -> bool | None:
        if not context.execution_options.get(PREPARED):
            return None
        cursor.execute(statement, parameters, prepare=True)
        return True


def ping_idle_connections(engine: Engine, idle_seconds: float) -> None:
    """Check a pooled connection before use when it has sat idle for more than `idle_seconds`.

    SQLAlchemy's `pool_pre_ping` sends `SELECT 1` before every checkout, a round trip on every
    request. A connection that was in use a moment ago is almost surely alive, and one that
    broke anyway fails the statement, which invalidates the pool like a failed ping would. An
    idle connection is where a database restart or a dropped TCP connection hides, so that is
    what gets checked, and replaced (with the rest of the pool) if it is dead.
    """
    dialect = engine.dialect

    @event.listens_for(engine, "connect")
    def fresh(_dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkin")
    def returned(_dbapi_connection: Any, record: Any) -> None:
        if record is not None:
            record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def ping(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if time.monotonic() - record.info.get("idle_since", 0.0) <= idle_seconds:
            return
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as error:
            if dialect.is_disconnect(error, dbapi_connection, None):
                # Like pool_pre_ping: the others are as old as this one, and as dead.
                raise exc.InvalidatePoolError() from error
            raise


def sqlite_pragmas(connection: Any, _record: Any) -> None:
    """Foreign keys on, concurrent requests wait for a lock instead of failing at once, and
    LIKE is case-sensitive, as on PostgreSQL.

    A path prefix (a list's `path`, a press kit's folder, a ZIP, a folder page, an OAI-PMH set)
    is a LIKE; SQLite's LIKE ignores the case of ASCII letters by default, so a kit for
    `presse/2026` reached `Presse/2026/...` (issue 36). Case-sensitive, LIKE compares code
    points as `=` does, and a prefix LIKE can read the path indexes (BINARY collation), which
    it could not before. The pragma is deprecated and a build may leave it out, silently: the
    connection checks that it took effect rather than let every folder match in any case.
    """
    cursor = connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=15000")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA case_sensitive_like=ON")
    cursor.execute("SELECT 'a' LIKE 'A'")
    (folds_case,) = cursor.fetchone()
    cursor.close()
    if folds_case:
        raise RuntimeError(
            "SQLite ignored PRAGMA case_sensitive_like: paths would match in any case"
        )


class SQLiteFileMissing(sqlite3.OperationalError):
    """The SQLite file of DATABASE_URL, or its folder, is not there; the message names the
    path it was looked for at. A driver error, so it is reported as the database's."""


#: Whether a connection made now may create a missing SQLite file (`creating_the_database`).
_MAY_CREATE = ContextVar("may_create_sqlite_file", default=False)


@contextmanager
def creating_the_database() -> Iterator[None]:
    """Lets the connections made inside create the SQLite file they open: only the migrations
    do (migrations/env.py)."""
    token = _MAY_CREATE.set(True)
    try:
        yield
    finally:
        _MAY_CREATE.reset(token)


def refuse_missing_sqlite_file(engine: Engine, relative: bool) -> None:
    """A connection to a SQLite file that is not there fails, naming the path, instead of
    creating an empty database: a wrong DATABASE_URL shows at the first command, and a
    command that only reads leaves nothing behind. `relative`: DATABASE_URL's path was
    relative (Flask-SQLAlchemy reads it from the instance folder)."""
    where = " (a relative path in DATABASE_URL starts at the instance folder)" if relative else ""

    @event.listens_for(engine, "do_connect")
    def look(_dialect: Any, _record: Any, cargs: list[Any], _cparams: dict[str, Any]) -> None:
        path = str(cargs[0]) if cargs else ":memory:"
        if path == ":memory:" or path.startswith("file:") or os.path.exists(path):
            return
        if not os.path.isdir(os.path.dirname(path)):
            raise SQLiteFileMissing(
                f"DATABASE_URL: the folder of the SQLite database {path} does not exist{where}"
            )
        if not _MAY_CREATE.get():
            raise SQLiteFileMissing(
                f"DATABASE_URL: the SQLite database {path} does not exist{where}: "
                "run `flask db upgrade` to create it (make run does)"
            )


def lock_database_on_sqlite(session: OrmSession) -> None:
    """SQLite ignores FOR UPDATE: take its write lock before the rows a change depends on
    are read, so concurrent changes wait for each other as on PostgreSQL instead of acting
    on what another request has just changed. (Python's sqlite3 begins transactions only at
    the first write, so none is open yet after a request's reads.) Does nothing on other
    databases, where the caller locks the rows it needs with FOR UPDATE."""
    connection = session.connection()
    if connection.dialect.name != "sqlite":
        return
    if not connection.connection.driver_connection.in_transaction:
        connection.exec_driver_sql("BEGIN IMMEDIATE")
